"""One agent CLI child process, owned by one nursery.

:func:`open_process` spawns the child (never through a shell, in its own
process group, with exactly the given environment, dying with its owner on
Linux: see :mod:`agentrt._os.spawn`), drains its stderr into a
bounded buffer and watches for its exit.  Its stdin and stdout are a
:class:`~agentrt._wire.Pipes` (:attr:`AgentProcess.pipes`), which the host's
engine writes and its read loop reads directly (no intermediate channel, no
extra copy); :meth:`AgentProcess.send` and :meth:`AgentProcess.receive_some`
are the same calls.  Leaving the context always stops the child with a
bounded escalation (shutdown line, close stdin, SIGTERM to the group, SIGKILL
to the group), reaps it and closes every pipe.

On Linux the exit is observed through a pidfd and ``waitid(WNOWAIT)`` (without
a pidfd: ``waitid(WNOWAIT)`` in a thread, a kqueue ``NOTE_EXIT`` on macOS), so
the child stays an unreaped zombie until :meth:`AgentProcess.stop`: its pid
(which is also the process-group id) cannot be recycled meanwhile, which makes
the final ``killpg`` of leftover grandchildren safe.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import trio

from ._exception_groups import collapse_single_group
from ._os import child_watch
from ._os.spawn import OwnedProcess
from ._os.spawn_process import LinuxProcess as _LinuxProcess
from ._process_events import ChildEvents, SyncClosable, fileno_of
from ._process_types import ExitStatus, ProcessSpec, spawn
from ._tap import RawTap
from ._wire import READ_SIZE, Pipes

__all__ = ["ProcessSpec", "ExitStatus", "AgentProcess", "open_process", "READ_SIZE"]

_KILL_WAIT = 5.0  # after SIGKILL, how long to wait for the exit before giving up
_DRAIN_WAIT = 0.5  # after the exit, how long stderr may take to reach EOF


class AgentProcess:
    """A running child; obtained from :func:`open_process`, valid inside its context.

    How it learns of the child's exit, stderr and readable stdout is the
    :class:`~agentrt._process_events.ChildEvents` object it owns.
    """

    pid: int
    """The child's pid, which is also its process-group id."""
    exited: trio.Event
    """Set once the child has exited (:attr:`exit_status` is then known)."""
    exit_status: ExitStatus | None
    """How it ended, once :attr:`exited` is set."""
    pipes: Pipes
    """Its stdin and stdout as the host's engine and read loop use them (:meth:`send`,
    :meth:`receive_some` and :meth:`stdout_fileno` are theirs)."""

    def __init__(self, proc: OwnedProcess, spec: ProcessSpec) -> None:
        self._proc = proc
        self._spec = spec
        self.pid = proc.pid
        self.exited = trio.Event()
        self.exit_status = None
        self._requested = False
        self._reaped = False
        self._output_cut = False
        self._exit_grace: float | None = None  # end_output_after_exit's grace, once asked
        self._exit_wake: Callable[[], None] | None = None  # call_on_exit's callback
        self._stopping: trio.Event | None = None
        assert proc.stdout is not None and proc.stderr is not None
        self.pipes = Pipes(proc.stdin, proc.stdout, fileno_of(proc.stdout))
        self._events = ChildEvents(proc, proc.stderr, stderr_limit=spec.stderr_limit, exited=self._child_exited)

    # --- caller API -----------------------------------------------------------------

    @property
    def tap(self) -> RawTap | None:
        """When set, gets every stdout chunk :meth:`receive_some` returns (before anyone decodes it)
        and every write to stdin once written (:meth:`send` and the shutdown line), in order; it is
        closed when the :func:`open_process` context is left.  See :class:`~agentrt.lowlevel.RawTap`."""
        return self.pipes.tap

    @tap.setter
    def tap(self, tap: RawTap | None) -> None:
        self.pipes.tap = tap

    async def send(self, data: bytes) -> None:
        """Write ``data`` to the child's stdin: one attempt, never retried.

        Raises ``stdin_unavailable`` if stdin is closed, was never a pipe, or the
        child stopped reading (broken pipe).
        """
        await self.pipes.send(data)

    async def receive_some(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next stdout chunk (at most ``max_bytes``); ``b""`` at end of output."""
        return await self.pipes.receive_some(max_bytes)

    def stdout_fileno(self) -> int | None:
        """The stdout pipe's file descriptor (to tune the pipe), ``None`` when the stream has none."""
        return self.pipes.stdout_fileno()

    async def end_output(self) -> None:
        """Stop reading stdout: pending and later :meth:`receive_some` calls return ``b""``.

        For when the child has exited but a grandchild still holds its stdout
        open, so that end of output would never come.
        """
        if self._end_output_now():
            return
        self.pipes.ended = True
        with trio.CancelScope(shield=True):
            await self.pipes.stdout.aclose()

    def end_output_after_exit(self, grace: float) -> bool:
        """Once the child has exited, end the output (:meth:`end_output`) ``grace`` seconds later.

        Served by the run's one watcher, with no task of its own; returns False
        where there is none (the caller then keeps its own timer).
        :attr:`output_cut` tells afterwards whether the grace ran out.
        """
        watcher = self._events.watcher
        if watcher is None:
            return False
        self._exit_grace = grace
        if self.exited.is_set():
            watcher.call_later(grace, self._cut_output)
        return True

    @property
    def output_cut(self) -> bool:
        """True once :meth:`end_output_after_exit`'s grace ran out before the output ended."""
        return self._output_cut

    def park_stdout(self, wake: Callable[[], None]) -> bool:
        """Call ``wake()`` once stdout has data or has ended, with no task waiting meanwhile.

        An idle reader hands its wait to the run's one watcher this way and
        ends its task; ``wake`` (called in the run's thread, it must not block)
        starts a new one.  Returns False, with nothing registered, where there
        is no watcher or the output has already ended: read on instead.
        """
        events = self._events
        if events.watcher is None or self.pipes.ended or events.parked:
            return False
        fd = self.stdout_fileno()
        if fd is None or fd < 0:
            return False
        events.park(fd, wake)
        return True

    def call_on_exit(self, wake: Callable[[], None]) -> bool:
        """Call ``wake()`` once the child has exited, from the run's watcher, with no task waiting.

        Returns False, with nothing registered, where there is no watcher or
        the child has already exited.
        """
        if self._events.watcher is None or self.exited.is_set() or self._exit_wake is not None:
            return False
        self._exit_wake = wake
        return True

    @property
    def stdout_parked(self) -> bool:
        """True while a :meth:`park_stdout` registration waits."""
        return self._events.parked

    async def close_stdin(self) -> None:
        """Close the child's stdin (it sees EOF); idempotent."""
        await self.pipes.close_stdin()

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (no-op once reaped)."""
        if self._reaped:
            return
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            # The group may be gone and its id reused by someone else's group.
            pass

    async def stop(self) -> ExitStatus:
        """Stop and reap the child; idempotent, shielded and bounded.

        Escalation: shutdown line (if the spec has one), close stdin, wait
        ``shutdown_grace``, SIGTERM the group, wait ``term_grace``, SIGKILL the
        group.  Concurrent callers share one stop.
        """
        with trio.CancelScope(shield=True):
            if self._stopping is not None:
                await self._stopping.wait()
            else:
                self._stopping = trio.Event()
                self.pipes.refusing = True  # a send now would race the shutdown line and the close
                try:
                    await self._escalate()
                finally:
                    self._stopping.set()
        return self._final_status()

    async def wait(self) -> ExitStatus:
        """Wait until the child exits (bound it with the caller's cancel scope)."""
        await self.exited.wait()
        assert self.exit_status is not None
        return self.exit_status

    @property
    def env(self) -> Mapping[str, str]:
        """The child's complete environment (what it was spawned with)."""
        return self._spec.env

    async def wait_stderr_closed(self) -> None:
        """Wait until the child's stderr reached its end (bound it with the caller's cancel scope)."""
        await self._events.stderr_done.wait()

    def stderr_tail(self, limit: int = 16384) -> bytes:
        """The last ``limit`` bytes of stderr kept so far."""
        if limit <= 0:
            return b""
        return bytes(self._events.stderr[-limit:])

    # --- internals ------------------------------------------------------------------

    def _child_exited(self, returncode: int | None, sig: int | None, reaped: bool) -> None:
        # From ChildEvents (the watcher's callback or the exit task): the child is gone.
        if reaped:
            self._reaped = True
        self.exit_status = ExitStatus(returncode=returncode, signal=sig, requested=self._requested)
        self.exited.set()
        watcher = self._events.watcher
        if watcher is not None and self._exit_grace is not None:
            watcher.call_later(self._exit_grace, self._cut_output)
        wake, self._exit_wake = self._exit_wake, None
        if wake is not None:
            wake()

    def _end_output_now(self) -> bool:
        """Watched children: end the output at once (sync, for a timer); False where not watched."""
        if self._events.watcher is None:
            return False
        pipes = self.pipes
        if not pipes.ended:
            pipes.ended = True
            wake = self._events.unpark()
            # Closing wakes a pending read (it then returns b""); a parked reader is woken instead.
            stdout = pipes.stdout
            assert isinstance(stdout, SyncClosable)
            stdout.close()
            if wake is not None:
                wake()
        return True

    def _cut_output(self) -> None:
        if not self.pipes.ended and self._events.watcher is not None:
            self._output_cut = True
            self._end_output_now()

    def _final_status(self) -> ExitStatus:
        if self.exit_status is None:
            # The child survived SIGKILL for _KILL_WAIT (uninterruptible sleep):
            # report a requested stop without a code rather than hang.
            return ExitStatus(returncode=None, signal=None, requested=True)
        return self.exit_status

    async def _escalate(self) -> None:
        spec = self._spec
        if not self.exited.is_set():
            self._requested = True
            pipes = self.pipes
            if spec.shutdown_line and pipes.stdin is not None and not pipes.sending:
                with trio.move_on_after(spec.shutdown_grace):
                    try:
                        await pipes.stdin.send_all(spec.shutdown_line)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass  # it is already gone or not reading: escalate
                    else:
                        if pipes.tap is not None:
                            pipes.tap.agent_input(spec.shutdown_line)
            await self.close_stdin()
            with trio.move_on_after(spec.shutdown_grace):
                await self.exited.wait()
            if not self.exited.is_set():
                self.send_signal(signal.SIGTERM)
                with trio.move_on_after(spec.term_grace):
                    await self.exited.wait()
            if not self.exited.is_set():
                self.send_signal(signal.SIGKILL)
                with trio.move_on_after(_KILL_WAIT):
                    await self.exited.wait()
        else:
            await self.close_stdin()
        if self.exited.is_set():
            # Leftover grandchildren in the group: the leader is an unreaped
            # zombie, so its pid (the group id) cannot have been reused.
            self.send_signal(signal.SIGKILL)
            await self._reap()

    async def _reap(self) -> None:
        if self._reaped:
            return
        with trio.move_on_after(_KILL_WAIT):
            await self._proc.wait()
            self._reaped = True


async def _stop_and_drain(agent: AgentProcess) -> None:
    # Leaving open_process: the bounded stop, then a reaped child's stderr read to its end (bounded).
    with trio.CancelScope(shield=True):
        await agent.stop()
        with trio.move_on_after(_DRAIN_WAIT if agent._reaped else 0):
            await agent._events.stderr_done.wait()


async def _close_pipes(agent: AgentProcess) -> None:
    # The process is done with: nothing more is read or written; its tap is closed with it.
    with trio.CancelScope(shield=True):
        await agent.close_stdin()
        await agent.pipes.stdout.aclose()
        await agent._events.close_stderr()
    tap, agent.pipes.tap = agent.pipes.tap, None
    if tap is not None:
        tap.close()


@asynccontextmanager
async def open_process(spec: ProcessSpec) -> AsyncIterator[AgentProcess]:
    """Spawn ``spec`` and yield its :class:`AgentProcess`.

    Raises ``spawn_failed`` if it cannot start.  Leaving the context (normally,
    by an exception or by cancellation) stops and reaps the child and closes
    every pipe; exceptions from the body propagate unchanged (not wrapped in an
    exception group).
    """
    proc = await spawn(spec)
    agent = AgentProcess(proc, spec)
    if child_watch.AVAILABLE and isinstance(proc, _LinuxProcess):
        # One shared watcher instead of an exit task and a stderr task per child.
        events = agent._events
        try:
            events.watch(child_watch.current_watcher(), proc)
            yield agent
        finally:
            await _stop_and_drain(agent)
            agent._exit_wake = None
            events.unwatch()
            await _close_pipes(agent)
        return
    try:
        # The background tasks never raise: a group holds the body's one exception.
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent._events.watch_exit)
                nursery.start_soon(agent._events.drain_stderr)
                try:
                    yield agent
                finally:
                    await _stop_and_drain(agent)
                    agent._events.cancel_tasks()
    finally:
        await _close_pipes(agent)
