"""How an :class:`~agentrt._process.AgentProcess` learns of its child's exit, stderr and stdout.

Two ways, one per platform: on Linux the run's one shared watcher
(:mod:`agentrt._os.child_watch`) calls back on the pidfd, stderr and a parked
stdout, with no task per child; elsewhere a shielded exit task and a stderr
task per child.  :class:`ChildEvents` is the object the process owns for
this: it keeps the descriptors, the registrations and the stderr buffer, and
tells the process of the exit through one callback (``exited(returncode,
signal, reaped)``).
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import trio

from ._os.child_watch import ChildWatcher
from ._os.spawn_process import LinuxProcess as _LinuxProcess
from ._os.spawn_process import OwnedProcess

__all__ = ["ChildEvents", "SyncClosable", "fileno_of"]

_HAS_PIDFD = sys.platform == "linux" and hasattr(os, "pidfd_open")


_HAS_WAITID = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")


def _status(info: os.waitid_result | None) -> tuple[int | None, int | None]:
    if info is None:
        return None, None
    if info.si_code == os.CLD_EXITED:
        return info.si_status, None
    return None, info.si_status


async def _wait_unreaped(pid: int) -> os.waitid_result | None:
    """Wait until child ``pid`` has exited, leaving it an unreaped zombie (no pidfd here).

    macOS: a ``NOTE_EXIT`` kevent on trio's kqueue, no thread.  Elsewhere a
    ``waitid(WNOWAIT)`` in a thread of its own (its own limiter: a thousand
    idle children must not queue behind trio's default forty), abandoned on
    cancellation.  Then a ``waitid(WNOHANG | WNOWAIT)`` reads the status.
    """
    if sys.platform == "darwin":  # pragma: no cover - macOS
        await _kevent_exit(pid)
    else:
        await trio.to_thread.run_sync(
            os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT,
            abandon_on_cancel=True, limiter=trio.CapacityLimiter(1),
        )
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)  # noqa: ASYNC222 - a zombie: never blocks


if sys.platform == "darwin":  # pragma: no cover - macOS

    async def _kevent_exit(pid: int) -> None:
        kqueue = trio.lowlevel.current_kqueue()
        note_exit = getattr(select, "KQ_NOTE_EXIT", 0x80000000)

        def event(flags: int) -> select.kevent:
            return select.kevent(pid, filter=select.KQ_FILTER_PROC, flags=flags, fflags=note_exit)

        try:
            kqueue.control([event(select.KQ_EV_ADD | select.KQ_EV_ONESHOT)], 0)
        except ProcessLookupError:
            return  # already exiting: the waitid below sees it

        def abort(_: object) -> trio.lowlevel.Abort:
            kqueue.control([event(select.KQ_EV_DELETE)], 0)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_kevent(pid, select.KQ_FILTER_PROC, abort)


def fileno_of(stream: object) -> Callable[[], int] | None:
    """``stream.fileno`` when the stream is over a descriptor of its own (trio's pipe streams on Unix), else None.

    What ``isinstance(stream, P)`` says for a runtime-checkable protocol ``P``
    with a ``fileno`` method, at the cost of one ``getattr``: such a check
    recomputes the protocol's attributes on every call (tens of microseconds,
    twice per child started).
    """
    fileno: Callable[[], int] | None = getattr(stream, "fileno", None)
    return fileno if callable(fileno) else None


@runtime_checkable
class SyncClosable(Protocol):
    """A stream that can be closed without awaiting (trio's ``FdStream``)."""

    def close(self) -> None: ...


class ChildEvents:
    """Exit, stderr and parked-stdout handling for one child (see the module doc)."""

    __slots__ = (
        "_exited",
        "_parked",
        "_parked_fd",
        "_pid",
        "_proc",
        "_stderr_fd",
        "_stderr_limit",
        "_stderr_stream",
        "_task_scopes",
        "pidfd",
        "stderr",
        "stderr_done",
        "watcher",
    )

    def __init__(
        self,
        proc: OwnedProcess,
        stderr: trio.abc.ReceiveStream,
        *,
        stderr_limit: int,
        exited: Callable[[int | None, int | None, bool], None],
    ) -> None:
        self._proc = proc
        self._pid = proc.pid
        self._stderr_stream = stderr
        self._stderr_limit = stderr_limit
        self._exited = exited
        #: The run's watcher while the child is watched by it (None: per-child tasks, or unwatched).
        self.watcher: ChildWatcher | None = None
        #: The exit descriptor while watched (-1 once let go: its number may name another child's by now).
        self.pidfd = -1
        self._stderr_fd = -1
        self._parked_fd = -1
        self._parked: Callable[[], None] | None = None
        #: Stderr kept so far (over the limit, the last half).
        self.stderr = bytearray()
        #: Set once stderr reached its end (or is no longer watched).
        self.stderr_done = trio.Event()
        # The background tasks' own scopes: shielded, so that cancelling the
        # caller's scope cannot blind the stop that its cancellation triggers.
        self._task_scopes: list[trio.CancelScope] = []

    # --- one task each (no shared watcher) -------------------------------------------

    def cancel_tasks(self) -> None:
        for scope in self._task_scopes:
            scope.cancel()

    async def watch_exit(self) -> None:
        """Background task: report the exit, without reaping where there is a pidfd (Linux)."""
        with trio.CancelScope(shield=True) as scope:
            self._task_scopes.append(scope)
            reaped = False
            try:
                if _HAS_PIDFD and isinstance(self._proc, _LinuxProcess):
                    returncode, sig = await self._wait_pidfd(self._proc)
                elif _HAS_WAITID:
                    # Not reaped: the leader's pid (the group id) stays ours until stop's killpg.
                    returncode, sig = _status(await _wait_unreaped(self._pid))
                else:  # pragma: no cover - no waitid (not on Linux or macOS)
                    code = await self._proc.wait()
                    reaped = True
                    returncode, sig = (code, None) if code >= 0 else (None, -code)
            except OSError:
                # The child vanished from under us (someone else reaped it).
                returncode, sig = None, None
            self._exited(returncode, sig, reaped)

    async def _wait_pidfd(self, proc: _LinuxProcess) -> tuple[int | None, int | None]:
        # The spawner's own pidfd, not a second one per child: it tells the exit
        # without reaping, so the pid stays ours until stop's final killpg.
        await proc.wait_exiting()
        # A readable pidfd means the child is a zombie: this never blocks.
        flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
        info = os.waitid(os.P_PID, self._pid, flags)  # noqa: ASYNC222
        while info is None:  # pragma: no cover - defensive, not seen on Linux
            await trio.sleep(0.01)
            info = os.waitid(os.P_PID, self._pid, flags)  # noqa: ASYNC222
        if info.si_code == os.CLD_EXITED:
            return info.si_status, None
        return None, info.si_status

    async def drain_stderr(self) -> None:
        """Background task: keep stderr in a bounded buffer (over the limit, keep the last half)."""
        with trio.CancelScope(shield=True) as scope:
            self._task_scopes.append(scope)
            limit = self._stderr_limit
            buf = self.stderr
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
                self.stderr_done.set()

    # --- the shared watcher (Linux): no task per child -------------------------------

    def watch(self, watcher: ChildWatcher, proc: _LinuxProcess) -> None:
        assert proc._pidfd is not None
        fileno = fileno_of(self._stderr_stream)
        assert fileno is not None
        self.watcher = watcher
        self.pidfd = proc._pidfd
        self._stderr_fd = fileno()
        watcher.add(self.pidfd, self._on_exit)
        watcher.add(self._stderr_fd, self._on_stderr)

    def unwatch(self) -> None:
        watcher = self.watcher
        if watcher is not None:
            # A descriptor already let go is -1: its number may name another child's by now.
            self.unpark()  # a parked reader is not woken: its owner is closing the process
            for fd in (self.pidfd, self._stderr_fd):
                if fd >= 0:
                    watcher.remove(fd)
            self.pidfd = self._stderr_fd = -1
            self.stderr_done.set()
            self.watcher = None

    @property
    def parked(self) -> bool:
        """True while a :meth:`park` registration waits."""
        return self._parked is not None

    def park(self, fd: int, wake: Callable[[], None]) -> None:
        """Call ``wake()`` once ``fd`` (stdout) is readable; the watcher must be there."""
        assert self.watcher is not None
        self._parked_fd, self._parked = fd, wake
        self.watcher.add(fd, self._on_stdout)

    def unpark(self) -> Callable[[], None] | None:
        """Let go of a parked stdout; its ``wake``, not called, if there was one."""
        wake, self._parked = self._parked, None
        if self._parked_fd >= 0 and self.watcher is not None:
            self.watcher.remove(self._parked_fd)
        self._parked_fd = -1
        return wake

    def _on_stdout(self) -> None:
        wake = self.unpark()
        if wake is not None:
            wake()

    def _on_exit(self) -> None:
        # The pidfd is readable: the child is a zombie, so this never blocks.
        assert self.watcher is not None
        # Before the reap closes the pidfd (the reap waits for this exit).
        self.watcher.remove(self.pidfd)
        self.pidfd = -1
        try:
            info = os.waitid(os.P_PID, self._pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except OSError:
            info = None  # someone else reaped it
        if info is None:
            returncode, sig = None, None
        elif info.si_code == os.CLD_EXITED:
            returncode, sig = info.si_status, None
        else:
            returncode, sig = None, info.si_status
        self._exited(returncode, sig, False)

    async def close_stderr(self) -> None:
        """Close the stderr pipe (the process's context is being left)."""
        await self._stderr_stream.aclose()

    def _on_stderr(self) -> None:
        try:
            chunk = os.read(self._stderr_fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            buf = self.stderr
            buf += chunk
            limit = self._stderr_limit
            if len(buf) > limit:
                del buf[: len(buf) - limit // 2]
            return
        assert self.watcher is not None
        self.watcher.remove(self._stderr_fd)
        self._stderr_fd = -1
        self.stderr_done.set()
