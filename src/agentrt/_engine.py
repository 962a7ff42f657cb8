"""The host engine: one agent process at a time, read, watched and stopped for its owner.

:class:`HostedProcess` is what a host (a :class:`~agentrt.Conversation`, the
FastAgent bot supervisor) builds on.  It owns the agent process
(:func:`~agentrt._process.open_process`), its read loop
(:class:`~agentrt._pump.Pump`), the parking of that loop while the owner is
idle (:class:`~agentrt._live.LiveProcess`), the first-output watch
(:class:`~agentrt._mismatch.FirstOutputWatch`), the raw taps, and the verdict
on the process's end.  It knows nothing of turns: the owner's policy comes in
as callbacks.

A prompt's way to the agent's stdin: the owner encodes it with :attr:`codec`
(:meth:`next_codec` before a respawn), :meth:`ensure` gives the process that
will read it, :meth:`send` writes it (:meth:`AgentProcess.send`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import attrs
import trio

from ._live import LiveProcess
from ._mismatch import FirstOutputWatch, ProtocolProbe
from ._os import child_watch
from ._process import AgentProcess, ExitStatus, ProcessSpec, open_process
from ._pump import EXIT_OUTPUT_GRACE, Pump, PumpResult, pump_events
from ._tap import RawTap
from .dialect import HostCodec
from .errors import AgentrtError
from .events import Event, TurnFailed

__all__ = ["HostedProcess", "ProcessEnd", "PUMP_DRAIN_TIMEOUT"]

PUMP_DRAIN_TIMEOUT = 10.0
"""Bound on waiting for a stopped or exited process's read loop to end (respawn, stop)."""


@attrs.frozen
class ProcessEnd:
    """What :class:`HostedProcess` hands ``on_exit`` once a process's output has ended and it has exited."""

    process: AgentProcess
    """The process that ended (still inside its context: its stderr is readable)."""
    status: ExitStatus
    """How it ended."""
    output: PumpResult
    """How its output ended (``eof`` False: cut off after the exit, or stopped at an oversize line)."""


class HostedProcess:
    """One agent process at a time for its owner: spawned, read, watched, stopped (see the module doc).

    Contract:

    * ``launch(resume, codec)`` gives the :class:`ProcessSpec` of the next
      process (it may raise, e.g. ``spawn_failed`` for an executable swapped
      since; nothing is spawned then); ``codec(resume)`` makes and starts the
      :class:`HostCodec` of the next process: every process speaks a fresh one.
    * ``on_events(events)`` gets each stdout chunk's decoded events in order
      (the read loop waits for it); ``on_oversize(process, before)`` is asked
      at a line past the framing cap whether to read on; ``on_send_error``
      gets a failed write of what the codec owes the agent;
      ``on_spawn(process)`` is called right after each spawn, before any read.
    * ``on_exit(end)`` is called once per process, after its output ended
      (EOF, or :data:`EXIT_OUTPUT_GRACE` after the exit) and it has exited;
      with ``exit_wait`` set, a process that closed its stdout but lives on is
      stopped that many seconds after EOF (else its exit is awaited).
    * ``idle()``, when given, says that nobody waits on the output: the read
      loop then parks (no task) until there is output, where the run has a
      shared watcher.
    * ``tap(process, number)`` may give a :class:`RawTap` for each process
      (numbered from 1): it sees every stdout chunk before it is decoded and
      every stdin write after it was written, and is closed with the process.
    * ``probe()`` gives each process's :class:`ProtocolProbe`: while the owner
      is not idle and after the first :meth:`send`, output of another dialect
      gets the ``protocol_mismatch`` failure inserted after it and the process
      is stopped; :meth:`send` with ``waiting`` bounds the wait for a
      recognised line (``on_mismatch`` gets the failure, the process is stopped).

    Every wait is bounded; the process is always stopped and reaped, its
    context left by the read loop's last task (or by :meth:`close`).
    """

    __slots__ = (  # sorted; a thousand idle conversations hold one engine each
        "_closed", "_codec", "_done", "_exit_grace", "_exit_wait", "_idle", "_inputs", "_launch", "_live",
        "_new_codec", "_nursery", "_on_events", "_on_exit", "_on_mismatch", "_on_oversize", "_on_send_error",
        "_on_spawn", "_pending", "_probe", "_proc", "_replace", "_stop_lock", "_tap", "_watch", "exit_status",
        "spawned",
    )  # fmt: skip

    def __init__(
        self,
        launch: Callable[[str | None, HostCodec], ProcessSpec],
        codec: Callable[[str | None], HostCodec],
        *,
        nursery: trio.Nursery,
        on_events: Callable[[list[Event]], Awaitable[None]],
        on_oversize: Callable[[AgentProcess, list[Event]], Awaitable[bool]],
        on_exit: Callable[[ProcessEnd], Awaitable[None]] | None = None,
        on_send_error: Callable[[AgentrtError], Awaitable[None]] | None = None,
        on_spawn: Callable[[AgentProcess], None] | None = None,
        idle: Callable[[], bool] | None = None,
        tap: Callable[[AgentProcess, int], RawTap | None] | None = None,
        probe: Callable[[], ProtocolProbe] | None = None,
        on_mismatch: Callable[[TurnFailed], Awaitable[None]] | None = None,
        exit_grace: float = EXIT_OUTPUT_GRACE,
        exit_wait: float | None = None,
    ) -> None:
        self._launch = launch
        self._new_codec = codec
        self._nursery = nursery
        self._on_events = on_events
        self._on_oversize = on_oversize
        self._on_exit = on_exit
        self._on_send_error = on_send_error
        self._on_spawn = on_spawn
        self._idle = idle
        self._tap = tap
        self._probe = probe
        self._on_mismatch = on_mismatch
        self._exit_grace = exit_grace
        self._exit_wait = exit_wait
        #: How the last process ended, once one has.
        self.exit_status: ExitStatus | None = None
        #: Processes spawned so far.
        self.spawned = 0
        self._codec: HostCodec | None = None
        self._pending: tuple[HostCodec, str | None] | None = None  # next_codec's, for the next spawn
        self._proc: AgentProcess | None = None
        self._done: trio.Event | None = None
        self._live: LiveProcess | None = None
        self._watch: FirstOutputWatch | None = None
        self._inputs = 0  # sends to the current process
        self._closed = False
        self._replace = False  # the process may hold half a write: the next ensure stops it first
        self._stop_lock: trio.Lock | None = None  # made on first use: idle hosts need none

    # -- what the owner reads ----------------------------------------------
    @property
    def process(self) -> AgentProcess | None:
        """The current (or last) process, if one was spawned."""
        return self._proc

    @property
    def codec(self) -> HostCodec | None:
        """The current process's codec (``None`` before the first spawn)."""
        return self._codec

    @property
    def running(self) -> bool:
        """A process is spawned, has not exited, and nothing asked for it to be replaced or stopped."""
        proc, done = self._proc, self._done
        return (
            proc is not None
            and done is not None
            and not done.is_set()
            and not proc.exited.is_set()
            and not self._replace
            and not self._closed
            and not (self._stop_lock is not None and self._stop_lock.locked())
        )

    def next_codec(self, resume: str | None) -> HostCodec:
        """The codec the next write goes through, to encode it once.

        The running process's; otherwise a fresh one, started for ``resume``,
        that the next :meth:`ensure` with the same ``resume`` spawns with.
        """
        if self.running and self._codec is not None:
            return self._codec
        if self._pending is None or self._pending[1] != resume:
            self._pending = (self._new_codec(resume), resume)
        return self._pending[0]

    # -- the process ---------------------------------------------------------
    async def ensure(self, resume: str | None = None) -> AgentProcess:
        """The running process, or a new one resuming ``resume`` (spawned here).

        Waits (bounded) for a stop under way and for an exited process's read
        loop to end first.  Raises ``session_exited`` after :meth:`close`, and
        whatever ``launch`` or the spawn raise (``spawn_failed``).
        """
        if self._replace:
            self._replace = False
            await self.stop()
        if self._stop_lock is not None and self._stop_lock.locked():
            async with self._stop_lock:  # a stop is under way (a cancel's): the next write goes to a new process
                pass
        proc, done = self._proc, self._done
        if proc is not None and done is not None and not done.is_set():
            if not proc.exited.is_set():
                return proc
            with trio.move_on_after(PUMP_DRAIN_TIMEOUT):  # exited, its read loop winding down
                await done.wait()
        if self._closed:
            raise AgentrtError("session_exited", "the conversation was stopped")
        pending = self._pending
        codec = pending[0] if pending is not None and pending[1] == resume else self._new_codec(resume)
        spec = self._launch(resume, codec)  # may refuse (the executable is checked again): nothing spawned
        self._pending = None
        self._codec = codec
        if child_watch.AVAILABLE:
            return await self._start_live(spec, codec)
        started: AgentProcess = await self._nursery.start(self._run_process, spec, codec)
        return started

    def replace_process(self) -> None:
        """The process may hold half a write (one cut short): the next :meth:`ensure` stops it first."""
        self._replace = True

    async def send(self, data: bytes, *, waiting: Callable[[], bool] | None = None) -> None:
        """Write ``data`` to the current process's stdin: one attempt (``stdin_unavailable`` when it fails).

        ``waiting``, on the first send to a process, arms the first-output bound
        (see the class doc): it says whether the write still waits on an answer.
        """
        proc = self._proc
        if proc is None:
            raise AgentrtError("stdin_unavailable", "no agent process is running")
        self._inputs += 1
        await proc.send(data)
        watch = self._watch
        if waiting is not None and watch is not None:
            watch.arm(lambda: waiting() and not proc.exited.is_set(), self._silent)

    async def stop(self) -> ExitStatus | None:
        """Stop the current process (idempotent, shielded, bounded); a later :meth:`ensure` spawns anew."""
        if self._stop_lock is None:
            self._stop_lock = trio.Lock()
        async with self._stop_lock:
            proc, done = self._proc, self._done
            if proc is not None and done is not None:
                with trio.CancelScope(shield=True):
                    await proc.stop()
                    with trio.move_on_after(PUMP_DRAIN_TIMEOUT):
                        await done.wait()
        return self.exit_status

    async def wait(self) -> ExitStatus | None:
        """Wait until the current process is done with: its output ended, ``on_exit`` returned, its context left.

        Its stderr has then been drained (:meth:`AgentProcess.stderr_tail` is
        complete).  Bound it with the caller's cancel scope.  Returns
        :attr:`exit_status`; at once when no process was spawned.
        """
        done = self._done
        if done is not None:
            await done.wait()
        return self.exit_status

    async def close(self) -> ExitStatus | None:
        """Stop for good (a later :meth:`ensure` raises ``session_exited``) and leave a parked process's context."""
        self._closed = True
        status = await self.stop()
        live = self._live
        if live is not None and live.parked:
            # No task will wake to leave the process context: leave it here.
            await live.close()
        return status

    # -- spawning and reading ------------------------------------------------
    def _spawned(self, proc: AgentProcess, codec: HostCodec) -> None:
        self.spawned += 1
        self._inputs = 0
        if self._tap is not None:
            proc.tap = self._tap(proc, self.spawned)
        probe = self._probe
        self._watch = None
        if probe is not None:
            self._watch = FirstOutputWatch(probe(), nursery=self._nursery)
        if self._on_spawn is not None:
            self._on_spawn(proc)

    def _oversize(self, proc: AgentProcess) -> Callable[[list[Event]], Awaitable[bool]]:
        return functools.partial(self._on_oversize, proc)

    async def _start_live(self, spec: ProcessSpec, codec: HostCodec) -> AgentProcess:
        # No task of its own while idle: the pump parks between turns (see agentrt._live).
        context = open_process(spec)
        proc = await context.__aenter__()
        live = LiveProcess(
            proc,
            context,
            Pump(
                proc,
                codec,
                self._events,
                on_oversize=self._oversize(proc),
                on_send_error=self._on_send_error,
                exit_grace=self._exit_grace,
            ),
            nursery=self._nursery,
            idle=self._idle or _never,
            after_output=self._after_output,
            park_until_exit=self._exit_wait is None,
        )
        self._live, self._proc, self._done = live, proc, live.done
        self._spawned(proc, codec)
        live.start()
        return proc

    async def _run_process(
        self, spec: ProcessSpec, codec: HostCodec, task_status: trio.TaskStatus[AgentProcess]
    ) -> None:
        done = trio.Event()
        self._done = done
        try:
            async with open_process(spec) as proc:
                self._proc = proc
                self._spawned(proc, codec)
                task_status.started(proc)
                result = await pump_events(
                    proc, codec, self._events, on_oversize=self._oversize(proc),
                    on_send_error=self._on_send_error, exit_grace=self._exit_grace,
                )
                await self._after_output(proc, result)
        finally:
            done.set()

    async def _events(self, events: list[Event]) -> None:
        watch = self._watch
        if watch is not None and watch.probe.armed and self._inputs and not (self._idle is not None and self._idle()):
            events, mismatch = watch.look(events)
            if mismatch:
                # This process will never answer in the configured dialect: stop it.
                self._nursery.start_soon(self.stop)
        await self._on_events(events)

    async def _silent(self, failure: TurnFailed) -> None:
        if self._on_mismatch is not None:
            await self._on_mismatch(failure)
        await self.stop()

    async def _after_output(self, proc: AgentProcess, result: PumpResult) -> None:
        # The output has ended: wait for the exit (bounded by exit_wait when set), then the owner's verdict.
        with trio.CancelScope(shield=True):
            if self._exit_wait is not None and not proc.exited.is_set():
                with trio.move_on_after(self._exit_wait):
                    await proc.exited.wait()
                if not proc.exited.is_set():
                    await proc.stop()
            status = await proc.wait()
        self.exit_status = status
        if self._on_exit is not None:
            await self._on_exit(ProcessEnd(proc, status, result))


def _never() -> bool:
    return False
