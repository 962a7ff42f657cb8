"""A conversation's process: spawning and respawning it, its read loop, stopping it.

A mixin of :class:`agentrt._conversation.Conversation` (its state stays on the
conversation): ``--resume`` on a respawn, the executable checked again right
before every spawn, the parking pump (:mod:`agentrt._live`) or one read task
per process, and how the process's end decides the live turn's fate.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._launch import LaunchSpec
from ._live import LiveProcess
from ._mismatch import ProtocolProbe
from ._os import child_watch
from ._process import AgentProcess, ExitStatus, open_process
from ._pump import Pump, PumpResult, pump_events
from ._turn_rules import TurnRules, exit_how
from ._turn_stream import TurnState
from ._why import exit_reason
from .dialect import Dialect, HostCodec
from .errors import AgentrtError
from .events import Diagnostic, Event

__all__: list[str] = []

# Bound on waiting for a process's pump to end (respawn, stop).
_PUMP_DRAIN_TIMEOUT = 10.0


def _absolute(cwd: str | None) -> str:
    # The working directory a protocol is told (ACP's session/new wants it absolute).
    return os.path.abspath(cwd) if cwd else os.getcwd()


class _ProcessManagement:
    """Spawn, respawn, read and stop the conversation's process."""

    launch: LaunchSpec
    dialect: Dialect
    exit_status: ExitStatus | None
    _nursery: trio.Nursery
    _cwd: str | None
    _parent_env: Mapping[str, str]
    _resume: str | None
    _term_grace: float | None
    _codec: HostCodec
    _rules: TurnRules
    _proc: AgentProcess | None
    _proc_done: trio.Event | None
    _live: LiveProcess | None
    _turn: TurnState | None
    _turns: int
    _stopping: bool
    _stop_lock: trio.Lock | None
    _replace_process: bool
    _first_output: float | None
    _probe: ProtocolProbe | None
    _recognised: trio.Event | None

    if TYPE_CHECKING:

        @property
        def session_id(self) -> str | None: ...

        async def _dispatch(self, events: Sequence[Event]) -> None: ...

    # -- process management ----------------------------------------------
    async def _ensure_process(self) -> AgentProcess:
        if self._replace_process:
            self._replace_process = False
            await self._stop_process()
        if self._stop_lock is not None and self._stop_lock.locked():
            # A stop is under way (a cancel's): the next turn goes to a new process.
            async with self._stop_lock:
                pass
        if self._proc is not None and self._proc_done is not None and not self._proc_done.is_set():
            if not self._proc.exited.is_set():
                return self._proc
            # It exited and its pump is winding down: respawn once it is done.
            with trio.move_on_after(_PUMP_DRAIN_TIMEOUT):
                await self._proc_done.wait()
        if self._stopping:
            raise AgentrtError("session_exited", "the conversation was stopped")
        resume = self._resume if self._turns == 0 else self.session_id or self._resume
        # The file may have been swapped since the launch was validated (a
        # respawn comes much later): check it again right before spawning.
        self.launch.check_executable()
        spec = self.launch.process_spec(
            self.dialect,
            resume=resume,
            cwd=self._cwd,
            parent_env=self._parent_env,
            shutdown_line=self._codec.encode_shutdown(),
        )
        if self._term_grace is not None:
            spec = attrs.evolve(spec, term_grace=self._term_grace)
        if self._proc is not None:
            # A new process speaks a new stream: fresh codec and framing state.
            self._codec = self.dialect.host_codec()
        self._codec.start(resume=resume, model=self.launch.model, cwd=_absolute(self._cwd))
        self._probe = ProtocolProbe(self.launch.protocol, self.launch.executable, self._first_output)
        self._recognised = None
        if child_watch.AVAILABLE:
            return await self._start_live(spec)
        proc: AgentProcess = await self._nursery.start(self._run_process, spec)
        return proc

    async def _start_live(self, spec: Any) -> AgentProcess:
        # No task of its own while idle: the pump parks between turns (see agentrt._live).
        context = open_process(spec)
        proc = await context.__aenter__()
        on_oversize, on_send_error = self._pump_callbacks(proc)
        pump = Pump(proc, self._codec, self._dispatch, on_oversize=on_oversize, on_send_error=on_send_error)
        live = LiveProcess(
            proc, context, pump, nursery=self._nursery, idle=self._idle, after_output=self._after_output
        )
        self._live, self._proc, self._proc_done = live, proc, live.done
        self._rules.new_process()
        live.start()
        return proc

    def _idle(self) -> bool:
        # No live turn: nothing waits on the output, so the pump may park.
        turn = self._turn
        return turn is None or turn.progress.terminal is not None

    async def _run_process(self, spec: Any, task_status: trio.TaskStatus[AgentProcess]) -> None:
        done = trio.Event()
        self._proc_done = done
        try:
            async with open_process(spec) as proc:
                self._proc = proc
                self._rules.new_process()
                task_status.started(proc)
                await self._read(proc)
        finally:
            done.set()

    async def _stop_process(self) -> None:
        if self._stop_lock is None:
            self._stop_lock = trio.Lock()
        async with self._stop_lock:
            proc, done = self._proc, self._proc_done
            if proc is None or done is None:
                return
            with trio.CancelScope(shield=True):
                await proc.stop()
                with trio.move_on_after(_PUMP_DRAIN_TIMEOUT):
                    await done.wait()

    def _watch_first_output(self, state: TurnState, proc: AgentProcess) -> None:
        """After the first prompt to a process, bound the wait for a line its dialect recognises."""
        probe = self._probe
        if probe is None or not probe.armed or probe.bound is None or self._recognised is not None:
            return
        self._recognised = recognised = trio.Event()
        if not child_watch.AVAILABLE:
            self._nursery.start_soon(self._first_output_task, state, proc, probe, recognised)
            return

        def due() -> None:
            # A timer of the run's one watcher: no task waits while the output is fine.
            if self._first_output_missing(state, proc, probe):
                self._nursery.start_soon(self._first_output_failed, state, proc, probe)

        child_watch.current_watcher().call_later(probe.bound, due)

    def _first_output_missing(self, state: TurnState, proc: AgentProcess, probe: ProtocolProbe) -> bool:
        return probe.armed and state.progress.live and state.proc is proc and not proc.exited.is_set()

    async def _first_output_task(
        self, state: TurnState, proc: AgentProcess, probe: ProtocolProbe, recognised: trio.Event
    ) -> None:
        assert probe.bound is not None
        with trio.move_on_after(probe.bound):
            await recognised.wait()
        if self._first_output_missing(state, proc, probe):
            await self._first_output_failed(state, proc, probe)

    async def _first_output_failed(self, state: TurnState, proc: AgentProcess, probe: ProtocolProbe) -> None:
        if not self._first_output_missing(state, proc, probe):
            return  # recognised (or ended) in the meantime
        failure = probe.silent()
        await self._dispatch(self._rules.fail_current(failure.code, failure.message))
        await self._stop_process()

    # -- the read loop -----------------------------------------------------
    async def _read(self, proc: AgentProcess) -> None:
        on_oversize, on_send_error = self._pump_callbacks(proc)
        result = await pump_events(
            proc, self._codec, self._dispatch, on_oversize=on_oversize, on_send_error=on_send_error
        )
        await self._after_output(proc, result)

    def _pump_callbacks(
        self, proc: AgentProcess
    ) -> tuple[Callable[[list[Event]], Awaitable[bool]], Callable[[AgentrtError], Awaitable[None]]]:
        async def on_oversize(before: list[Event]) -> bool:
            # Stopped before the turn ends: a next turn must not be written to this agent.
            with trio.CancelScope(shield=True):
                await proc.stop()
            await self._dispatch(
                before
                + [Diagnostic(code="runtime_output_oversize", detail="stdout line exceeded 4 MiB; stopping the agent")]
                + self._rules.fail_current(
                    "runtime_output_oversize", "the agent's output exceeded 4 MiB without a newline"
                )
            )
            return False

        async def on_send_error(exc: AgentrtError) -> None:
            await self._dispatch(self._rules.fail_current(exc.code, exc.detail or exc.code))

        return on_oversize, on_send_error

    async def _after_output(self, proc: AgentProcess, _result: PumpResult) -> None:
        # The output has ended: how the process ended decides the live turn's fate.
        with trio.CancelScope(shield=True):
            status = await proc.wait()
        self.exit_status = status
        turn = self._turn
        ours = turn is not None and turn.proc is proc
        reason = None
        ending = turn is not None and ours and turn.progress.live
        if ending and turn is not None and not (turn.progress.cancel_requested or status.requested):
            reason = await exit_reason(proc, exit_how(status))  # the agent's last stderr lines say why
        await self._dispatch(self._rules.at_exit(status, ours=ours, reason=reason))
