"""The host engine: one agent process at a time, read, watched and stopped for its owner.

:class:`HostedProcess` is what a host (a :class:`~agentrt.Conversation`, the
FastAgent bot supervisor) builds on.  It owns the agent process
(:func:`~agentrt._process.open_process`), its read loop
(:class:`~agentrt._wire.Pump`), the parking of that loop while the owner is
idle (:class:`~agentrt._live.LiveProcess`), the first-output watch
(:class:`~agentrt._protocol_mismatch.FirstOutputWatch`), the raw taps, and the verdict
on the process's end.  It knows nothing of turns: the owner's policy is one
object, a :class:`ProcessOwner`, whose methods the engine calls.

A prompt's way to the agent's stdin: the owner encodes it with
:meth:`HostedProcess.next_codec`'s codec, :meth:`~HostedProcess.ensure`
gives the process that will read it, :meth:`~HostedProcess.send` writes it
(:meth:`Pipes.send <agentrt._wire.Pipes.send>`, the process's stdin).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from ._live import LiveProcess, pump_events
from ._os import child_watch
from ._process import AgentProcess, ExitStatus, ProcessSpec, open_process
from ._protocol_mismatch import FirstOutputWatch, ProtocolProbe
from ._tap import RawTap
from ._wire import EXIT_OUTPUT_GRACE, Pump, PumpResult
from .dialect import HostCodec
from .errors import AgentrtError
from .events import Event, TurnFailed

__all__ = ["HOOK_FAILED", "HostedProcess", "ProcessEnd", "ProcessOwner", "PUMP_DRAIN_TIMEOUT"]

PUMP_DRAIN_TIMEOUT = 10.0
"""Bound on waiting for a stopped or exited process's read loop to end (respawn, stop)."""

HOOK_FAILED = "owner_hook_failed"
"""The code of :attr:`ProcessEnd.failure` when one of the owner's hooks raised."""


@attrs.frozen
class ProcessEnd:
    """What :class:`HostedProcess` hands ``on_exit`` once a process's output has ended and it has exited."""

    process: AgentProcess
    """The process that ended (still inside its context: its stderr is readable)."""
    status: ExitStatus
    """How it ended."""
    output: PumpResult
    """How its output ended (``eof`` False: cut off after the exit, or stopped at an oversize line)."""
    failure: AgentrtError | None = None
    """Set when an owner hook raised while this process ran (code :data:`HOOK_FAILED`, the hook's
    exception as its ``__cause__``): the engine stopped the process then and called no hook of it since."""


class ProcessOwner(Protocol):
    """What a :class:`HostedProcess` asks of its owner: the one object its policy lives in.

    Contract, method by method (the engine never calls two at once for one process):

    * ``await launch(resume, codec)`` gives the :class:`ProcessSpec` of the next
      process; it may check things first (in a thread) and may raise (e.g.
      ``spawn_failed``): nothing is spawned then, and :meth:`HostedProcess.ensure`
      raises it.  ``new_codec(resume)`` makes and starts the next process's
      :class:`HostCodec`: every process speaks a fresh one.
    * ``probe()`` gives the process's :class:`ProtocolProbe` (``None``: no
      protocol check), asked at the first :meth:`HostedProcess.send` to it;
      ``tap(process, number)`` its :class:`RawTap` or ``None`` (numbered from 1),
      asked right after the spawn.
    * ``await on_spawn(process)`` runs after each spawn and before anything of
      it is read (the read loop starts once it returned).
    * ``await on_events(events)`` gets each stdout chunk's decoded events in
      order (the read loop waits for it); ``await on_oversize(process, before)``
      answers, at a line past the framing cap, whether to read on;
      ``await on_send_error(error)`` gets a failed write of what the codec owes
      the agent; ``await on_mismatch(failure)`` a ``protocol_mismatch`` failure
      of the first-output bound (the process is stopped after it).
    * ``idle()`` says that nobody waits on the output: the read loop then parks
      (no task) until there is output, where the run has a shared watcher.
    * ``await on_exit(end)`` runs once per process, after its output ended and it
      exited.  An exception from any other hook (not a cancellation) stops that
      process and reaches ``on_exit`` as ``end.failure`` (:data:`HOOK_FAILED`);
      one from ``on_exit`` itself propagates to the engine's nursery.
    """

    async def launch(self, resume: str | None, codec: HostCodec) -> ProcessSpec: ...
    def new_codec(self, resume: str | None) -> HostCodec: ...
    def probe(self) -> ProtocolProbe | None: ...
    def tap(self, process: AgentProcess, number: int) -> RawTap | None: ...
    def idle(self) -> bool: ...
    async def on_spawn(self, process: AgentProcess) -> None: ...
    async def on_events(self, events: list[Event]) -> None: ...
    async def on_oversize(self, process: AgentProcess, before: list[Event]) -> bool: ...
    async def on_send_error(self, error: AgentrtError) -> None: ...
    async def on_mismatch(self, failure: TurnFailed) -> None: ...
    async def on_exit(self, end: ProcessEnd) -> None: ...


class HostedProcess:
    """One agent process at a time for its :class:`ProcessOwner`: spawned, read, watched, stopped.

    Contract (the owner's side is :class:`ProcessOwner`'s):

    * :meth:`ensure` gives the running process or spawns the next one;
      :meth:`next_codec` the codec a write goes through (so it is encoded once);
      :meth:`send` writes; :meth:`signal` signals the process (group) it
      spawned, no other; :meth:`stop` and :meth:`close` end it, bounded.
    * With ``exit_wait`` set, a process that closed its stdout but lives on
      is stopped that many seconds after EOF (else its exit is awaited);
      reading ends ``exit_grace`` seconds after the exit at the latest.
    * While the owner is not idle and after the first :meth:`send` to a
      process, output of another dialect gets the ``protocol_mismatch`` failure
      inserted after it and the process is stopped; :meth:`send` with
      ``waiting`` bounds the wait for a recognised line (``on_mismatch``).
    * A hook that raises ends its process (see :class:`ProcessOwner`).

    Every wait is bounded; the process is always stopped and reaped, its
    context left by the read loop's last task (or by :meth:`close`).
    :attr:`process` and :attr:`codec` are the current (or last) process and
    its codec (``None`` before the first spawn): read them, never assign.
    """

    __slots__ = (  # sorted; a thousand idle conversations hold one engine each
        "_closed", "_done", "_exit_grace", "_exit_wait", "_failure", "_live", "_nursery", "_owner",
        "_pending", "_replace", "_stop_lock", "_watch", "codec", "exit_status", "process", "spawned",
    )  # fmt: skip

    def __init__(
        self,
        owner: ProcessOwner,
        *,
        nursery: trio.Nursery,
        exit_grace: float = EXIT_OUTPUT_GRACE,
        exit_wait: float | None = None,
    ) -> None:
        self._owner = owner
        self._nursery = nursery
        self._exit_grace = exit_grace
        self._exit_wait = exit_wait
        #: How the last process ended, once one has.
        self.exit_status: ExitStatus | None = None
        #: Processes spawned so far.
        self.spawned = 0
        #: The current (or last) process, if one was spawned.
        self.process: AgentProcess | None = None
        #: The current process's codec (``None`` before the first spawn).
        self.codec: HostCodec | None = None
        self._pending: tuple[HostCodec, str | None] | None = None  # next_codec's, for the next spawn
        self._done: trio.Event | None = None
        self._live: LiveProcess | None = None
        self._watch: FirstOutputWatch | None = None  # made at the first send: an unprompted process needs none
        self._failure: AgentrtError | None = None  # a hook of the current process raised
        self._closed = False
        self._replace = False  # the process may hold half a write: the next ensure stops it first
        self._stop_lock: trio.Lock | None = None  # made on first use: idle hosts need none

    @property
    def running(self) -> bool:
        """A process is spawned, has not exited, and nothing asked for it to be replaced or stopped."""
        proc, done = self.process, self._done
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
        codec = self.codec
        if codec is not None and self.running:
            return codec
        pending = self._pending
        if pending is None or pending[1] != resume:
            self._pending = pending = (self._owner.new_codec(resume), resume)
        return pending[0]

    # -- the process ---------------------------------------------------------
    async def ensure(self, resume: str | None = None) -> AgentProcess:
        """The running process, or a new one resuming ``resume`` (spawned here).

        Waits (bounded) for a stop under way and for an exited process's read
        loop to end first.  Raises ``session_exited`` after :meth:`close`, and
        whatever the owner's ``launch`` or the spawn raise (``spawn_failed``).
        """
        if self._replace:
            self._replace = False
            await self.stop()
        if self._stop_lock is not None and self._stop_lock.locked():
            async with self._stop_lock:  # a stop is under way (a cancel's): the next write goes to a new process
                pass
        proc, done = self.process, self._done
        if proc is not None and done is not None and not done.is_set():
            if not proc.exited.is_set():
                return proc
            with trio.move_on_after(PUMP_DRAIN_TIMEOUT):  # exited, its read loop winding down
                await done.wait()
        if self._closed:
            raise AgentrtError("session_exited", "the conversation was stopped")
        pending = self._pending
        codec = pending[0] if pending is not None and pending[1] == resume else self._owner.new_codec(resume)
        spec = await self._owner.launch(resume, codec)  # may refuse (e.g. the executable swapped): nothing spawned
        self._pending = None
        self.codec = codec
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
        proc = self.process
        if proc is None:
            raise AgentrtError("stdin_unavailable", "no agent process is running")
        if waiting is not None and self._watch is None and self._failure is None:
            probe = self._owner.probe()  # before the write: its answer may be read before this task runs on
            self._watch = FirstOutputWatch(probe, nursery=self._nursery) if probe is not None else None
        await proc.pipes.send(data)
        watch = self._watch
        if waiting is not None and watch is not None:
            watch.arm(lambda: waiting() and not proc.exited.is_set(), self._silent)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process (group) this engine spawned last; a no-op before it, and once it is reaped."""
        proc = self.process
        if proc is not None:
            proc.send_signal(sig)  # AgentProcess signals only its own group, never once reaped

    async def stop(self) -> ExitStatus | None:
        """Stop the current process (idempotent, shielded, bounded); a later :meth:`ensure` spawns anew."""
        if self._stop_lock is None:
            self._stop_lock = trio.Lock()
        async with self._stop_lock:
            proc, done = self.process, self._done
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
    async def _spawned(self, proc: AgentProcess) -> None:
        self.spawned += 1
        self._watch = None
        self._failure = None
        owner = self._owner
        hook = "tap"
        try:
            proc.tap = owner.tap(proc, self.spawned)
            hook = "on_spawn"
            await owner.on_spawn(proc)
        except Exception as exc:
            self._hook_failed(hook, exc)

    def _hook_failed(self, hook: str, exc: Exception) -> None:
        # The owner's policy broke on this process: no hook of it runs again but on_exit, which is told why.
        if self._failure is None:
            failure = AgentrtError(HOOK_FAILED, f"the owner's {hook} raised {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            self._failure = failure
            self._nursery.start_soon(self.stop)

    async def _start_live(self, spec: ProcessSpec, codec: HostCodec) -> AgentProcess:
        # No task of its own while idle: the pump parks between turns (see agentrt._live).
        context = open_process(spec)
        proc = await context.__aenter__()
        pump = Pump(
            proc, codec, self._events, on_oversize=self._oversize, on_send_error=self._send_failed,
            exit_grace=self._exit_grace,
        )  # fmt: skip
        live = LiveProcess(
            proc, context, pump, nursery=self._nursery, idle=self._owner.idle, after_output=self._after_output,
            park_until_exit=self._exit_wait is None,
        )  # fmt: skip
        self._live, self.process, self._done = live, proc, live.done
        await self._spawned(proc)
        live.start()
        return proc

    async def _run_process(
        self, spec: ProcessSpec, codec: HostCodec, task_status: trio.TaskStatus[AgentProcess]
    ) -> None:
        done = trio.Event()
        self._done = done
        try:
            async with open_process(spec) as proc:
                self.process = proc
                await self._spawned(proc)
                task_status.started(proc)
                result = await pump_events(
                    proc, codec, self._events, on_oversize=self._oversize, on_send_error=self._send_failed,
                    exit_grace=self._exit_grace,
                )  # fmt: skip
                await self._after_output(proc, result)
        finally:
            done.set()

    async def _events(self, events: list[Event]) -> None:
        if self._failure is not None:
            return
        owner = self._owner
        watch = self._watch
        if watch is not None and watch.probe.armed and not owner.idle():
            events, mismatch = watch.look(events)
            if mismatch:
                # This process will never answer in the configured dialect: stop it.
                self._nursery.start_soon(self.stop)
        try:
            await owner.on_events(events)
        except Exception as exc:
            self._hook_failed("on_events", exc)

    async def _oversize(self, before: list[Event]) -> bool:
        # The pump of the current process: ensure spawns the next only once this one's read loop ended.
        proc = self.process
        if self._failure is not None or proc is None:
            return True  # read (and discard) on until the stop ends the output
        try:
            return await self._owner.on_oversize(proc, before)
        except Exception as exc:
            self._hook_failed("on_oversize", exc)
            return True

    async def _send_failed(self, error: AgentrtError) -> None:
        if self._failure is None:
            try:
                await self._owner.on_send_error(error)
            except Exception as exc:
                self._hook_failed("on_send_error", exc)

    async def _silent(self, failure: TurnFailed) -> None:
        if self._failure is None:
            try:
                await self._owner.on_mismatch(failure)
            except Exception as exc:
                self._hook_failed("on_mismatch", exc)
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
        await self._owner.on_exit(ProcessEnd(proc, status, result, self._failure))
