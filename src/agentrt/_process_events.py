"""How an :class:`~agentrt._process.AgentProcess` learns of its child's exit, stderr and stdout.

Two ways, one per platform: on Linux the run's one shared watcher
(:mod:`agentrt._os.child_watch`) calls back on the pidfd, stderr and a parked stdout,
with no task per child; elsewhere a shielded exit task and a stderr task per
child.  A mixin, so the state stays on the process itself (no extra object
between the read loop and the pipe).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import trio

from ._os.child_watch import ChildWatcher
from ._os.spawn import OwnedProcess, _LinuxProcess
from ._process_types import ExitStatus, ProcessSpec

__all__: list[str] = []

_HAS_PIDFD = sys.platform == "linux" and hasattr(os, "pidfd_open")


class _ChildEvents:
    """Exit, stderr and parked-stdout handling; the state is :class:`AgentProcess`'s own."""

    pid: int
    exited: trio.Event
    exit_status: ExitStatus | None
    _proc: OwnedProcess
    _spec: ProcessSpec
    _requested: bool
    _reaped: bool
    _output_ended: bool
    _output_cut: bool
    _exit_grace: float | None
    _parked_fd: int
    _parked: Callable[[], None] | None
    _exit_wake: Callable[[], None] | None
    _stderr: bytearray
    _stderr_done: trio.Event
    _task_scopes: list[trio.CancelScope]
    _watcher: ChildWatcher | None
    _pidfd: int
    _stderr_fd: int
    _stdout: trio.abc.ReceiveStream
    _stderr_stream: trio.abc.ReceiveStream

    # --- one task each (no shared watcher) -------------------------------------------

    def _cancel_tasks(self) -> None:
        for scope in self._task_scopes:
            scope.cancel()

    async def _watch_exit(self) -> None:
        """Background task: set :attr:`exited` when the child exits, without reaping (Linux)."""
        with trio.CancelScope(shield=True) as scope:
            self._task_scopes.append(scope)
            await self._watch_exit_inner()

    async def _watch_exit_inner(self) -> None:
        try:
            if _HAS_PIDFD and isinstance(self._proc, _LinuxProcess):
                returncode, sig = await self._wait_pidfd(self._proc)
            else:
                code = await self._proc.wait()
                self._reaped = True
                returncode, sig = (code, None) if code >= 0 else (None, -code)
        except OSError:
            # The child vanished from under us (someone else reaped it).
            returncode, sig = None, None
        self.exit_status = ExitStatus(returncode=returncode, signal=sig, requested=self._requested)
        self.exited.set()

    async def _wait_pidfd(self, proc: _LinuxProcess) -> tuple[int | None, int | None]:
        # The spawner's own pidfd, not a second one per child: it tells the exit
        # without reaping, so the pid stays ours until stop's final killpg.
        await proc.wait_exiting()
        # A readable pidfd means the child is a zombie: this never blocks.
        flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
        info = os.waitid(os.P_PID, self.pid, flags)  # noqa: ASYNC222
        while info is None:  # pragma: no cover - defensive, not seen on Linux
            await trio.sleep(0.01)
            info = os.waitid(os.P_PID, self.pid, flags)  # noqa: ASYNC222
        if info.si_code == os.CLD_EXITED:
            return info.si_status, None
        return None, info.si_status

    # --- the shared watcher (Linux): no task per child -------------------------------

    def _unpark(self) -> Callable[[], None] | None:
        wake, self._parked = self._parked, None
        if self._parked_fd >= 0 and self._watcher is not None:
            self._watcher.remove(self._parked_fd)
        self._parked_fd = -1
        return wake

    def _on_stdout(self) -> None:
        wake = self._unpark()
        if wake is not None:
            wake()

    def _end_output_now(self) -> bool:
        """Watched children: end the output at once (sync, for a timer); False where not watched."""
        if self._watcher is None:
            return False
        if not self._output_ended:
            self._output_ended = True
            wake = self._unpark()
            # Closing wakes a pending read (it then returns b""); a parked reader is woken instead.
            self._stdout.close()  # type: ignore[attr-defined]
            if wake is not None:
                wake()
        return True

    def _cut_output(self) -> None:
        if not self._output_ended and self._watcher is not None:
            self._output_cut = True
            self._end_output_now()

    def _watch(self, watcher: ChildWatcher, proc: _LinuxProcess) -> None:
        assert proc._pidfd is not None
        self._watcher = watcher
        self._pidfd = proc._pidfd
        self._stderr_fd = self._stderr_stream.fileno()  # type: ignore[attr-defined]
        watcher.add(self._pidfd, self._on_exit)
        watcher.add(self._stderr_fd, self._on_stderr)

    def _unwatch(self) -> None:
        watcher = self._watcher
        if watcher is not None:
            # A descriptor already let go is -1: its number may name another child's by now.
            self._unpark()  # a parked reader is not woken: its owner is closing the process
            self._exit_wake = None
            for fd in (self._pidfd, self._stderr_fd):
                if fd >= 0:
                    watcher.remove(fd)
            self._pidfd = self._stderr_fd = -1
            self._stderr_done.set()
            self._watcher = None

    def _on_exit(self) -> None:
        # The pidfd is readable: the child is a zombie, so this never blocks.
        assert self._watcher is not None
        # Before the reap closes the pidfd (the reap waits for this exit).
        self._watcher.remove(self._pidfd)
        self._pidfd = -1
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except OSError:
            info = None  # someone else reaped it
        if info is None:
            returncode, sig = None, None
        elif info.si_code == os.CLD_EXITED:
            returncode, sig = info.si_status, None
        else:
            returncode, sig = None, info.si_status
        self.exit_status = ExitStatus(returncode=returncode, signal=sig, requested=self._requested)
        self.exited.set()
        if self._exit_grace is not None:
            self._watcher.call_later(self._exit_grace, self._cut_output)
        wake, self._exit_wake = self._exit_wake, None
        if wake is not None:
            wake()

    def _on_stderr(self) -> None:
        try:
            chunk = os.read(self._stderr_fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            buf = self._stderr
            buf += chunk
            limit = self._spec.stderr_limit
            if len(buf) > limit:
                del buf[: len(buf) - limit // 2]
            return
        assert self._watcher is not None
        self._watcher.remove(self._stderr_fd)
        self._stderr_fd = -1
        self._stderr_done.set()

    async def _drain_stderr(self) -> None:
        """Background task: keep stderr in a bounded buffer (over the limit, keep the last half)."""
        with trio.CancelScope(shield=True) as scope:
            self._task_scopes.append(scope)
            await self._drain_stderr_inner()

    async def _drain_stderr_inner(self) -> None:
        limit = self._spec.stderr_limit
        buf = self._stderr
        try:
            while True:
                chunk = await self._stderr_stream.receive_some(65536)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > limit:
                    del buf[: len(buf) - limit // 2]
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self._stderr_done.set()
