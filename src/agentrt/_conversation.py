"""A conversation: turns over one live agent process, with the contract's turn rules.

The conversation owns the read loop (stdout chunk → framing → codec → turn
rules → batch), and that loop *is* the stdout pump: no channel sits between
the pipe and the decoder, and everything decoded from one chunk travels as one
:class:`~agentrt.events.EventBatch`, so the per-line cost stays a few hundred
nanoseconds above JSON parsing.

Turn rules enforced here, whatever the dialect:

* exactly one terminal event (``turn_completed`` / ``turn_failed``) per turn;
  a second one is a ``duplicate_terminal_event`` diagnostic;
* output before the first input is an ``output_before_input`` diagnostic and
  belongs to no turn;
* the agent exiting before the terminal event fails the turn with
  ``exit_before_result`` (with its code or signal), at the latest
  :data:`EXIT_OUTPUT_GRACE` after the exit even if a grandchild still holds
  stdout open (its process group is then killed);
* the first valid ``session_started`` establishes the session; a repeat with
  the same id is dropped, another id is a ``session_id_changed`` diagnostic,
  an id of the wrong shape is ``invalid_session_id`` and never used to resume;
* one stdin write attempt per send, never replayed.
"""

from __future__ import annotations

import math
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._exceptions import collapse_single_group
from ._framing import JsonlReader, Malformed, OutputOversize
from ._launch import LaunchSpec, is_valid_session_id
from ._process import AgentProcess, ExitStatus, open_process
from .dialect import Dialect, HostCodec, Turn, content_text
from .errors import AgentrtError
from .events import (
    ControlRequest,
    Diagnostic,
    Event,
    EventBatch,
    ProcessExited,
    SessionStarted,
    TextDelta,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from .permissions import PermissionPolicy, PermissionRequest

if TYPE_CHECKING:
    from ._plugins import Plugins
    from .sinks import Sink

__all__ = ["Conversation", "TurnStream", "open_conversation", "RUNTIME_FAILURE_CODES"]

#: Codes of turn failures caused by the runtime or the process, not reported by the agent.
RUNTIME_FAILURE_CODES = frozenset(
    {
        "exit_before_result",
        "runtime_output_oversize",
        "spawn_failed",
        "stdin_unavailable",
        "session_exited",
        # The executable was swapped between validation and a (re)spawn.
        "cli_executable_not_found",
        "cli_executable_is_symlink",
        "cli_executable_not_regular_file",
        "cli_executable_not_executable",
    }
)

# How long the permission policy may take before the request is denied: the
# agent is blocked on the answer, so it must come.
_POLICY_TIMEOUT = 60.0
# How long an interrupt may take to produce the turn's terminal event before
# the process is stopped instead.
_INTERRUPT_GRACE = 3.0
#: After the agent exits, how long its stdout is still read before the turn
#: ends anyway: a grandchild (an MCP server, a helper) may hold the pipe open,
#: so end of output may never come.
EXIT_OUTPUT_GRACE = 2.0
# Bounds on the shielded cleanup when the conversation ends.
_PUMP_DRAIN_TIMEOUT = 10.0
_SINK_CLOSE_TIMEOUT = 10.0
#: A sink that fails this many batches in a row is detached.
MAX_SINK_FAILURES = 3


def _absolute(cwd: str | None) -> str:
    # The working directory a protocol is told (ACP's session/new wants it absolute).
    return os.path.abspath(cwd or os.getcwd())


class _SinkRunner:
    """One attached sink: its own task, its own bounded buffer and policy.

    A batch the sink fails on is a ``sink_failed`` diagnostic (and a line on
    stderr), and later batches are still delivered: one odd event must not
    silently end the recording.  After :data:`MAX_SINK_FAILURES` failures in a
    row the sink is detached (``sink_detached``).
    """

    def __init__(self, conv: Conversation, sink: Sink) -> None:
        self.conv = conv
        self.sink = sink
        self.failed = False  # detached
        self.failures = 0  # in a row
        self.failed_batches = 0  # in all, closing included
        self.coalesce = getattr(sink, "policy", "block") == "coalesce"
        size = max(1, int(getattr(sink, "buffer_size", 64)))
        self.size = size
        self.send, self.recv = trio.open_memory_channel[EventBatch](size)
        self.pending: list[EventBatch] = []
        self.wake = trio.Event()
        self.closed = False
        self.done = trio.Event()

    @property
    def name(self) -> str:
        return str(getattr(self.sink, "name", type(self.sink).__name__))

    async def deliver(self, batch: EventBatch) -> None:
        if self.failed or self.closed:
            return
        if self.coalesce:
            self.pending.append(batch)
            if len(self.pending) > self.size:
                # Falling behind: merge what waits instead of slowing the agent.
                self.pending = [_merge(self.pending)]
            self.wake.set()
        else:
            await self.send.send(batch)

    def close(self) -> None:
        self.closed = True
        if self.coalesce:
            self.wake.set()
        else:
            self.send.close()

    async def run(self) -> None:
        try:
            if self.coalesce:
                while True:
                    await self.wake.wait()
                    self.wake = trio.Event()
                    batches, self.pending = self.pending, []
                    if batches:
                        await self._handle(_merge(batches) if len(batches) > 1 else batches[0])
                    if self.closed and not self.pending:
                        break
            else:
                async with self.recv:
                    async for batch in self.recv:
                        await self._handle(batch)
        finally:
            self.done.set()

    async def _handle(self, batch: EventBatch) -> None:
        if self.failed:
            return
        try:
            await self.sink.handle(batch)
        except Exception as exc:
            self.record_failure(exc, f"events {batch.first_seq}..{batch.first_seq + len(batch.events) - 1}")
        else:
            self.failures = 0

    def record_failure(self, exc: Exception, what: str) -> None:
        """Report one failure of the sink; detach it after too many in a row."""
        self.failures += 1
        self.failed_batches += 1
        cause = f"{type(exc).__name__}: {exc}"
        if self.failures >= MAX_SINK_FAILURES:
            self.failed = True
            code = "sink_detached"
            detail = f"sink {self.name!r} failed {self.failures} times in a row and was detached: {cause}"
        else:
            code = "sink_failed"
            detail = f"sink {self.name!r} failed on {what} ({self.failures} in a row): {cause}"
        print(f"agentrt: warning: {code}: {detail}", file=sys.stderr)
        # The run loop keeps draining (without handling once detached), so a producer
        # that blocks on this sink's buffer is never stuck behind a dead sink.
        self.conv._internal_events.append(Diagnostic(code=code, detail=detail))


def _merge(batches: list[EventBatch]) -> EventBatch:
    """Coalesce batches: adjacent text deltas of one block are concatenated."""
    events: list[Event] = []
    for b in batches:
        for ev in b.events:
            if (
                type(ev) is TextDelta
                and events
                and type(events[-1]) is TextDelta
                and events[-1].index == ev.index
            ):
                prev = events[-1]
                events[-1] = TextDelta(text=prev.text + ev.text, index=ev.index)
            else:
                events.append(ev)
    first = batches[0]
    last = batches[-1]
    return EventBatch(
        source=first.source, first_seq=first.first_seq, mono=last.mono, wall=last.wall, events=tuple(events)
    )


class _TurnState:
    def __init__(self, number: int) -> None:
        self.number = number
        self.send, self.recv = trio.open_memory_channel[Sequence[Event]](math.inf)
        self.terminal: Event | None = None
        self.ended = trio.Event()
        self.cancel_requested = False
        # The process this turn was written to: only its exit can end the turn.
        self.proc: AgentProcess | None = None


class TurnStream:
    """The events of one turn, ending with its terminal event.

    Iterating writes the turn (once) and yields events as they arrive::

        async for event in conv.send("hello"):
            ...

    ``await stream.result()`` drains it and returns the terminal event.
    """

    def __init__(self, conv: Conversation, turn: Turn) -> None:
        self._conv = conv
        self._turn = turn
        self._state: _TurnState | None = None
        self._buffer: list[Event] = []
        self._pos = 0
        self._done = False
        self.terminal: TurnCompleted | TurnFailed | None = None

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> Event:
        if self._state is None:
            self._state = await self._conv._begin_turn(self._turn)
        while self._pos >= len(self._buffer):
            if self._done:
                raise StopAsyncIteration
            try:
                batch = await self._state.recv.receive()
            except trio.EndOfChannel:
                self._done = True
                raise StopAsyncIteration from None
            self._buffer = list(batch)
            self._pos = 0
        ev = self._buffer[self._pos]
        self._pos += 1
        if isinstance(ev, (TurnCompleted, TurnFailed)):
            self.terminal = ev
            self._done = True
        return ev

    async def batches(self) -> AsyncIterator[Sequence[Event]]:
        """The turn's events a received chunk at a time (cheaper than one at a time).

        Each item is the events one stdout read produced, in order; the last
        item ends with the terminal event.  Use either this or plain iteration
        on one stream, not both.
        """
        if self._state is None:
            self._state = await self._conv._begin_turn(self._turn)
        if self._pos < len(self._buffer):
            # What plain iteration had received but not returned yet; it may end the turn.
            rest = self._buffer[self._pos :]
            self._pos = len(self._buffer)
            if isinstance(rest[-1], (TurnCompleted, TurnFailed)):
                self.terminal = rest[-1]
                self._done = True
            yield rest
        while not self._done:
            try:
                batch = await self._state.recv.receive()
            except trio.EndOfChannel:
                self._done = True
                return
            last = batch[-1] if batch else None
            if isinstance(last, (TurnCompleted, TurnFailed)):
                self.terminal = last
                self._done = True
            yield batch

    async def result(self) -> TurnCompleted | TurnFailed:
        """Consume the rest of the turn and return its terminal event."""
        # A received chunk at a time: draining event by event costs a
        # coroutine step per event for nothing.
        async for _ in self.batches():
            pass
        assert self.terminal is not None
        return self.terminal


class Conversation:
    """Turns over one live agent process (respawned with ``--resume`` when needed).

    Create it with :func:`open_conversation`.
    """

    def __init__(
        self,
        *,
        nursery: trio.Nursery,
        launch: LaunchSpec,
        dialect: Dialect,
        permission_policy: PermissionPolicy,
        cwd: str | None,
        parent_env: Mapping[str, str],
        conversation_id: str,
        resume: str | None,
        term_grace: float | None = None,
    ) -> None:
        self.id = conversation_id
        self.launch = launch
        self.dialect = dialect
        #: The agent's native session id, once it reported a valid one.
        self.session_id: str | None = None
        #: The model the agent reported (else the launch model).
        self.model: str | None = launch.model
        #: How the last process ended, once it has.
        self.exit_status: ExitStatus | None = None
        self._nursery = nursery
        self._policy = permission_policy
        self._cwd = cwd
        self._parent_env = parent_env
        self._resume = resume
        self._term_grace = term_grace
        self._codec: HostCodec = dialect.host_codec()
        self._proc: AgentProcess | None = None
        self._proc_done: trio.Event | None = None
        self._turn: _TurnState | None = None
        self._turns = 0
        self._inputs_this_process = 0
        self._seq = 0
        self._sinks: list[_SinkRunner] = []
        self._internal_events: list[Event] = []
        self._stopping = False
        self._stop_lock = trio.Lock()
        self._send_lock = trio.Lock()

    # -- public API ------------------------------------------------------
    def send(self, prompt: str | Turn) -> TurnStream:
        """Send one user turn; iterate the result for its events.

        The turn is written (exactly once) when iteration starts.  Raises
        ``turn_in_progress`` if another turn has not ended, and
        ``unsupported_content_block`` before writing anything the dialect
        cannot carry.
        """
        turn = Turn.text(prompt) if isinstance(prompt, str) else prompt
        return TurnStream(self, turn)

    async def ask(self, prompt: str | Turn) -> TurnCompleted | TurnFailed:
        """Send a turn and wait for its terminal event (events still reach the sinks)."""
        return await self.send(prompt).result()

    async def attach(self, sink: Sink) -> None:
        """Fan every later batch out to ``sink`` (in its own task)."""
        runner = _SinkRunner(self, sink)
        self._sinks.append(runner)
        self._nursery.start_soon(runner.run)

    @property
    def sink_failures(self) -> dict[str, int]:
        """Attached sinks that failed at least once: name → failed batches (closing included).

        Some events then never reached that sink; ``agentrt run`` exits non-zero.
        """
        return {runner.name: runner.failed_batches for runner in self._sinks if runner.failed_batches}

    @property
    def process(self) -> AgentProcess | None:
        """The live agent process, if any."""
        return self._proc

    async def cancel_turn(self) -> None:
        """End the current turn with ``turn_cancelled``; the conversation stays usable.

        Dialects that can interrupt (``encode_interrupt``) are asked to; otherwise,
        or when the agent does not end the turn in time, the process is stopped and
        the next send starts a new one with ``--resume`` (when a session id is known).
        """
        state = self._turn
        if state is None or state.terminal is not None:
            return
        state.cancel_requested = True
        if self._proc is not None:
            line = self._codec.encode_interrupt()
            if line:
                try:
                    await self._proc.send(line)
                except AgentrtError:
                    pass
                else:
                    with trio.move_on_after(_INTERRUPT_GRACE):
                        await state.ended.wait()
                    if state.terminal is not None:
                        return
        await self._stop_process()
        if state.terminal is None:  # the pump did not get to end it
            await self._dispatch(self._fail_current("turn_cancelled", "the turn was cancelled"))

    async def stop(self) -> ExitStatus | None:
        """Stop the agent process (idempotent, bounded); returns how it ended."""
        self._stopping = True
        await self._stop_process()
        return self.exit_status

    # -- process management ----------------------------------------------
    async def _ensure_process(self) -> AgentProcess:
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
        proc: AgentProcess = await self._nursery.start(self._run_process, spec)
        return proc

    async def _run_process(self, spec: Any, task_status: trio.TaskStatus[AgentProcess]) -> None:
        done = trio.Event()
        self._proc_done = done
        try:
            async with open_process(spec) as proc:
                self._proc = proc
                self._inputs_this_process = 0
                task_status.started(proc)
                watch = trio.CancelScope()
                self._nursery.start_soon(self._end_output_after_exit, proc, watch)
                try:
                    await self._pump(proc)
                finally:
                    watch.cancel()
        finally:
            done.set()

    @staticmethod
    async def _end_output_after_exit(proc: AgentProcess, watch: trio.CancelScope) -> None:
        # Races the exit against end of output without a cost per chunk: the
        # pump reads on undisturbed until the grace after the exit is over.
        with watch:
            await proc.exited.wait()
            await trio.sleep(EXIT_OUTPUT_GRACE)
            await proc.end_output()

    async def _stop_process(self) -> None:
        async with self._stop_lock:
            proc, done = self._proc, self._proc_done
            if proc is None or done is None:
                return
            with trio.CancelScope(shield=True):
                await proc.stop()
                with trio.move_on_after(_PUMP_DRAIN_TIMEOUT):
                    await done.wait()

    # -- the read loop -----------------------------------------------------
    async def _pump(self, proc: AgentProcess) -> None:
        codec = self._codec
        reader = JsonlReader(codec.line_loader)
        drain = codec.drain_output
        oversize = False
        seen_malformed = 0
        while True:
            chunk = await proc.receive_some()
            if not chunk:
                break
            try:
                objs = reader.feed(chunk)
            except OutputOversize as exc:
                oversize = True
                # Stopped before the turn ends: a next turn must not be written to this agent.
                with trio.CancelScope(shield=True):
                    await proc.stop()
                # What complete lines preceded the oversize one still counts.
                await self._dispatch(
                    self._decode(codec, exc.objects)
                    + [Diagnostic(code=exc.code, detail="stdout line exceeded 4 MiB; stopping the agent")]
                    + self._fail_current(exc.code, "the agent's output exceeded 4 MiB without a newline")
                )
                break
            if objs:
                if reader.malformed_count == seen_malformed:
                    # The usual case: every line parsed, one batch call to the codec.
                    await self._dispatch(codec.decode_batch(objs))
                else:
                    seen_malformed = reader.malformed_count
                    await self._dispatch(self._decode(codec, objs))
                owed = drain()
                if owed:  # a request/response protocol's next request (e.g. its handshake)
                    try:
                        await proc.send(owed)
                    except AgentrtError as exc:
                        await self._dispatch(self._fail_current(exc.code, exc.detail or exc.code))
        if not oversize:
            tail = self._decode(codec, reader.finish())
            tail.extend(codec.finish())
            if tail:
                await self._dispatch(tail)
        with trio.CancelScope(shield=True):
            status = await proc.wait()
        self.exit_status = status
        final: list[Event] = []
        if self._turn is not None and self._turn.terminal is None and self._turn.proc is proc:
            if self._turn.cancel_requested or status.requested:
                final.extend(self._fail_current("turn_cancelled", "the turn was cancelled"))
            else:
                how = f"signal={status.signal}" if status.signal is not None else f"code={status.returncode}"
                from ._why import exit_reason

                final.extend(self._fail_current("exit_before_result", await exit_reason(proc, how)))
        final.append(
            ProcessExited(returncode=status.returncode, signal=status.signal, requested=status.requested)
        )
        await self._dispatch(final)

    def _decode(self, codec: HostCodec, objs: list[Any]) -> list[Event]:
        events: list[Event] = []
        for obj in objs:
            if type(obj) is Malformed:
                events.append(
                    Diagnostic(
                        code="malformed_output_line",
                        detail=f"malformed stdout line #{obj.count}: {obj.head.decode('utf-8', 'replace')}",
                    )
                )
            else:
                events.extend(codec.decode(obj))
        return events

    def _fail_current(self, code: str, message: str) -> list[Event]:
        if self._turn is None or self._turn.terminal is not None:
            return []
        return [TurnFailed(code=code, message=message)]

    # -- turn rules and fan-out ---------------------------------------------
    def _apply(self, events: Sequence[Event]) -> tuple[list[Event], list[Event], list[ControlRequest]]:
        """Apply the turn rules: (events for sinks, events for the current turn, control requests)."""
        state = self._turn
        live = state is not None and state.terminal is None
        if self._inputs_this_process and not [ev for ev in events if type(ev) is not TextDelta]:
            # The hot path: a chunk of text deltas, nothing to rule on.
            batch = events if isinstance(events, list) else list(events)
            return batch, batch if live else [], []
        out: list[Event] = []
        for_turn: list[Event] = []
        controls: list[ControlRequest] = []
        for ev in events:
            cls = type(ev)
            if cls is TextDelta:  # the hot path
                if self._inputs_this_process == 0:
                    ev = Diagnostic(code="output_before_input", detail="text before the first input", raw=ev.raw)
                out.append(ev)
                if live:
                    for_turn.append(ev)
                continue
            if cls is Diagnostic or cls is ProcessExited or cls is TurnStarted:
                out.append(ev)
                if live:
                    for_turn.append(ev)
                continue
            if self._inputs_this_process == 0 and cls is not TurnFailed:
                out.append(
                    Diagnostic(code="output_before_input", detail=f"{ev.type} before the first input", raw=ev.raw)
                )
                continue
            if cls is SessionStarted:
                sid = ev.session_id  # type: ignore[attr-defined]
                if not isinstance(sid, str) or not is_valid_session_id(sid):
                    ev = Diagnostic(code="invalid_session_id", detail="session id has the wrong shape", raw=ev.raw)
                elif self.session_id is None:
                    self.session_id = sid
                    if ev.model:  # type: ignore[attr-defined]
                        self.model = ev.model  # type: ignore[attr-defined]
                elif sid == self.session_id:
                    continue
                else:
                    ev = Diagnostic(
                        code="session_id_changed",
                        detail="the agent reported a different session id; the first one is kept",
                        raw=ev.raw,
                    )
            elif cls is TurnCompleted or cls is TurnFailed:
                if live and state is not None:
                    if cls is TurnFailed and state.cancel_requested and ev.code != "turn_cancelled":  # type: ignore[attr-defined]
                        # The agent ended the turn because it was interrupted: say so in one code.
                        ev = TurnFailed(
                            code="turn_cancelled",
                            message=f"the turn was cancelled (the agent said {ev.code})",  # type: ignore[attr-defined]
                            usage=ev.usage,  # type: ignore[attr-defined]
                            raw=ev.raw,
                        )
                    state.terminal = ev
                    state.ended.set()
                    live = False
                    out.append(ev)
                    for_turn.append(ev)
                    continue
                ev = Diagnostic(
                    code="duplicate_terminal_event", detail=f"{ev.type} with no turn in flight", raw=ev.raw
                )
            elif cls is ControlRequest:
                controls.append(ev)  # type: ignore[arg-type]
            out.append(ev)
            if live:
                for_turn.append(ev)
        return out, for_turn, controls

    async def _dispatch(self, events: Sequence[Event]) -> None:
        state = self._turn
        out, for_turn, controls = self._apply(events)
        if self._internal_events:
            # A new list: `out` may be the very list handed to the turn's consumer.
            out = out + self._internal_events
            self._internal_events.clear()
        if not out:
            return
        batch = EventBatch(
            source=self.id, first_seq=self._seq, mono=trio.current_time(), wall=time.time(), events=tuple(out)
        )
        self._seq += len(out)
        if state is not None and for_turn:
            state.send.send_nowait(for_turn)
            if state.terminal is not None:
                state.send.close()
                if self._turn is state:
                    self._turn = None
        for runner in self._sinks:
            await runner.deliver(batch)
        for req in controls:
            self._nursery.start_soon(self._answer_control, req)

    async def _answer_control(self, req: ControlRequest) -> None:
        proc = self._proc
        if proc is None:
            return
        response: dict[str, Any] | None = None
        error: str | None = None
        own: bytes | None = None
        with trio.move_on_after(_POLICY_TIMEOUT):
            own = await self._codec.answer_control(req)
        if own is not None:
            try:
                await proc.send(own)
            except AgentrtError as exc:
                self._internal_events.append(Diagnostic(code=exc.code, detail="could not answer a control request"))
            return
        if req.subtype == "can_use_tool":
            body = req.request
            tool_input = body.get("input")
            permission = PermissionRequest(
                tool_name=str(body.get("tool_name", "")),
                input=tool_input if isinstance(tool_input, Mapping) else {},
                request_id=req.request_id,
                raw=req.raw,
            )
            decision = None
            with trio.move_on_after(_POLICY_TIMEOUT):
                try:
                    decision = await self._policy(permission)
                except Exception as exc:
                    error = f"permission policy failed: {type(exc).__name__}"
            if decision is None and error is None:
                error = "permission policy did not answer in time; denied"
            if decision is not None:
                if decision.allow:
                    response = {"behavior": "allow", "updatedInput": dict(decision.updated_input or permission.input)}
                else:
                    response = {"behavior": "deny", "message": decision.message}
        else:
            error = f"unsupported control request subtype: {req.subtype}"
        line = self._codec.encode_control_response(req, response, error)
        if line:
            try:
                await proc.send(line)
            except AgentrtError as exc:
                self._internal_events.append(Diagnostic(code=exc.code, detail="could not answer a control request"))

    async def _begin_turn(self, turn: Turn) -> _TurnState:
        async with self._send_lock:
            if self._turn is not None and self._turn.terminal is None:
                raise AgentrtError("turn_in_progress", "the previous turn has not ended")
            codec = self._codec
            data = codec.encode_turn(turn)  # refuses unsupported blocks before any write
            self._turns += 1
            state = _TurnState(self._turns)
            self._turn = state
            await self._dispatch([TurnStarted(turn=state.number, prompt=content_text(turn))])
            try:
                proc = await self._ensure_process()
                if self._codec is not codec:
                    # A respawned process has a fresh (possibly stateful) codec.
                    data = self._codec.encode_turn(turn)
                self._inputs_this_process += 1
                state.proc = proc
                await proc.send(data)  # the one write attempt of this send
            except AgentrtError as exc:
                await self._dispatch(self._fail_current(exc.code, exc.detail or exc.code))
            return state

    # -- shutdown ------------------------------------------------------------
    async def _aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.stop()
            # Whatever the pump could not deliver is lost only if a sink hangs past its bound.
            if self._internal_events:
                await self._dispatch([])
            for runner in self._sinks:
                runner.close()
            with trio.move_on_after(_SINK_CLOSE_TIMEOUT):
                for runner in self._sinks:
                    await runner.done.wait()
            for runner in self._sinks:
                with trio.move_on_after(_SINK_CLOSE_TIMEOUT):
                    try:
                        await runner.sink.aclose()
                    except Exception as exc:
                        runner.record_failure(exc, "closing")


@asynccontextmanager
async def open_conversation(
    launch: LaunchSpec | None = None,
    *,
    plugins: Plugins | None = None,
    resume: str | None = None,
    sinks: Sequence[Sink] = (),
    cwd: str | None = None,
    parent_env: Mapping[str, str] | None = None,
    conversation_id: str | None = None,
    permission_policy: PermissionPolicy | None = None,
    dialect: Dialect | None = None,
    term_grace: float | None = None,
) -> AsyncIterator[Conversation]:
    """Open a conversation with the agent CLI that ``launch`` names.

    ``launch`` defaults to the launch contract read from the environment
    (``AWP_AGENT_CLI_*``).  The process starts here, so launch and spawn
    errors (``spawn_failed``) are raised on entry.  If the process exits, the
    next send starts a new one, resuming the native session when the agent
    reported a valid id.  ``term_grace`` overrides how long a stopping agent
    has between SIGTERM and SIGKILL.  Leaving the block (normally, by
    exception or by cancellation of the caller's scope) stops the agent and
    flushes the sinks, shielded and bounded.

    Example::

        async with open_conversation(LaunchSpec(executable="/usr/local/bin/my-agent")) as conv:
            async for event in conv.send("hello"):
                print(event)
    """
    env = dict(os.environ) if parent_env is None else dict(parent_env)
    if launch is None:
        launch = LaunchSpec.from_env(env)
    if resume is not None and not is_valid_session_id(resume):
        raise AgentrtError("invalid_resume_session_id", "resume id must match [A-Za-z0-9._:-]{1,256}")
    if plugins is None and (dialect is None or permission_policy is None):
        from ._plugins import get_plugins

        plugins = get_plugins()
    if dialect is None:
        assert plugins is not None
        dialect = plugins.dialect(launch.protocol)
    if permission_policy is None:
        assert plugins is not None
        permission_policy = plugins.permission_policy()
    # The nursery only runs our background tasks: an error from the body or from
    # spawning is the caller's one exception, not a group to unpack.
    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            conv = Conversation(
                nursery=nursery,
                launch=launch,
                dialect=dialect,
                permission_policy=permission_policy,
                cwd=cwd,
                parent_env=env,
                conversation_id=conversation_id or str(uuid.uuid4()),
                resume=resume,
                term_grace=term_grace,
            )
            for sink in sinks:
                await conv.attach(sink)
            try:
                # Spawn now, not at the first send: output before the first input is
                # then visible as such, and a spawn failure surfaces here.
                await conv._ensure_process()
                yield conv
            finally:
                await conv._aclose()
                nursery.cancel_scope.cancel()
