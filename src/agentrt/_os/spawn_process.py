"""What :func:`agentrt._os.spawn.open_owned_process` returns: a child whose exit is observed through a pidfd."""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Protocol

import trio

__all__ = ["OwnedProcess", "LinuxProcess"]


class OwnedProcess(Protocol):
    """A spawned child: what :func:`open_owned_process` returns (a ``trio.Process`` look-alike)."""

    pid: int
    stdin: trio.abc.SendStream | None
    stdout: trio.abc.ReceiveStream | None
    stderr: trio.abc.ReceiveStream | None

    @property
    def returncode(self) -> int | None:
        """The exit code (negative: killed by that signal), or ``None`` while it runs; reaps if it exited."""
        ...

    async def wait(self) -> int:
        """Wait for the exit, reap the child and return :attr:`returncode`."""
        ...


class LinuxProcess:
    """A child of ours (from the spawn server or a spawner thread); exit observed through a pidfd."""

    def __init__(
        self,
        pid: int,
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream | None,
        stderr: trio.lowlevel.FdStream | None,
        popen: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self._popen = popen
        self._code: int | None = None
        self.pid = pid
        self.stdin: trio.abc.SendStream | None = stdin
        self.stdout: trio.abc.ReceiveStream | None = stdout
        self.stderr: trio.abc.ReceiveStream | None = stderr
        # Opened before anyone can reap the child, so it names this child.
        self._pidfd: int | None = os.pidfd_open(pid)
        self._wait_lock: trio.Lock | None = None  # made on first wait: a lock per idle child adds up

    def __repr__(self) -> str:
        return f"<owned process {self.pid}>"

    def _poll(self, block: bool = False) -> int | None:
        if self._popen is not None:
            return self._popen.wait() if block else self._popen.poll()
        if self._code is None:
            try:
                pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                # Reaped elsewhere (a waitpid(-1) in the embedding program): the code is lost.
                self._code = 255
            else:
                if pid:
                    self._code = os.waitstatus_to_exitcode(status)
        return self._code

    @property
    def returncode(self) -> int | None:
        code = self._poll()
        if code is not None:
            self._close_pidfd()
        return code

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            trio.lowlevel.notify_closing(fd)
            os.close(fd)

    def _lock(self) -> trio.Lock:
        if self._wait_lock is None:
            self._wait_lock = trio.Lock()
        return self._wait_lock

    async def wait(self) -> int:
        async with self._lock():
            if self._poll() is None and self._pidfd is not None:
                with contextlib.suppress(trio.ClosedResourceError):
                    await trio.lowlevel.wait_readable(self._pidfd)
            # A readable pidfd means a zombie: this reaps without blocking.
            code = self._poll(block=True)
            assert code is not None
            self._close_pidfd()
        return code

    async def wait_exiting(self) -> None:
        """Wait until the child has exited, without reaping it (it stays a zombie until :meth:`wait`).

        Waits on the same pidfd as :meth:`wait` (no second descriptor per
        child); returns at once if the child was already reaped.
        """
        async with self._lock():
            if self._pidfd is not None:
                with contextlib.suppress(trio.ClosedResourceError):
                    await trio.lowlevel.wait_readable(self._pidfd)

    def __del__(self) -> None:
        fd = getattr(self, "_pidfd", None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
