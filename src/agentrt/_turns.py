"""The conversation's side of a turn: the turn rules, and the engine's owner that applies them.

:class:`TurnRules` is the turn state machine, whatever the dialect:
synchronous and I/O-free (it holds no trio objects, so it is table-tested
directly).  It sees every event decoded from one agent process's output (and
the runtime's own) and decides what reaches the sinks, what belongs to the
turn in flight and which control requests need an answer:

* exactly one terminal event (``turn_completed`` / ``turn_failed``) per turn;
  a second one is a ``duplicate_terminal_event`` diagnostic;
* output before the first input is an ``output_before_input`` diagnostic and
  belongs to no turn;
* the first valid ``session_started`` establishes the session; a repeat with
  the same id is dropped, another id is a ``session_id_changed`` diagnostic,
  an id of the wrong shape is ``invalid_session_id`` and never used to resume;
* a turn the caller cancelled that the agent ends with another failure code
  ends with the cancel's own code, ``turn_cancelled`` (or ``turn_timeout``
  for a timeout), the agent's code in the message;
* the process exiting before the terminal fails the turn
  (:func:`agentrt._exit_reason.exit_before_result`).

:class:`ConversationOwner` is the :class:`~agentrt.lowlevel.ProcessOwner` a
conversation gives its engine (:class:`agentrt._engine.HostedProcess`), one
small slotted object instead of a bound method per callback.  At every spawn
it gives the :class:`~agentrt.lowlevel.ProcessSpec` (the executable checked
again right before: it may have been swapped since the launch was validated,
a respawn comes much later; ``--resume`` when resuming), a fresh host codec
started with the session to resume, the model and the absolute working
directory, the protocol probe of :mod:`agentrt._protocol_mismatch` and one
:class:`~agentrt.lowlevel.RawTap` feeding the tap of every attached
:class:`~agentrt.lowlevel.TapSource` sink (:func:`agentrt._tap.tap_all`).  It
does the rules' I/O: each chunk's events (and the conversation's own, such as
``TurnStarted``) through :meth:`TurnRules.apply` to the turn in flight's
channel, as one :class:`~agentrt.events.EventBatch` to the fan-out, control
requests to :func:`agentrt._control_answer.answer_control`; and it decides what
an oversize line, a failed write, a wrong protocol or the process's end mean
for the live turn.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from ._control_answer import answer_control
from ._engine import ProcessEnd
from ._exit_reason import exit_before_result, exit_how, exit_reason
from ._fanout import CLOSE_TIMEOUT, Fanout
from ._launch import is_valid_session_id
from ._process import AgentProcess, ExitStatus, ProcessSpec
from ._protocol_mismatch import ProtocolProbe
from ._tap import RawTap, TapInfo, TapSource, tap_all
from .dialect import HostCodec
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

if TYPE_CHECKING:
    from ._conversation import Conversation

__all__ = ["ConversationOwner", "TurnProgress", "TurnRules"]


@attrs.define(eq=False)
class TurnProgress:
    """One turn as the rules see it."""

    number: int
    terminal: TurnCompleted | TurnFailed | None = None
    """Its terminal event, once it has ended."""
    cancel_requested: bool = False
    """The caller asked for the turn to be ended early (see :mod:`agentrt._turn_end`)."""
    cancel_code: str = "turn_cancelled"
    """The code the turn ends with once it was asked to end: ``turn_cancelled``, ``turn_timeout``..."""
    cancel_message: str = "the turn was cancelled"
    """The message that goes with :attr:`cancel_code`."""

    @property
    def live(self) -> bool:
        """The turn has not ended yet."""
        return self.terminal is None


# The hot path's test: every event of a chunk is a text delta.
_ONLY_TEXT = frozenset({TextDelta})


class TurnRules:
    """The turn state machine of one conversation (see the module doc).

    ``apply(events)`` returns ``(out, for_turn, controls)``: the events for the
    sinks, those for the turn in flight (a subset of ``out``), and the control
    requests to answer.  It never does I/O and never blocks.
    """

    def __init__(self, *, model: str | None = None) -> None:
        #: The agent's native session id, once it reported a valid one.
        self.session_id: str | None = None
        #: The model the agent reported (else the one given here).
        self.model = model
        #: The turn in flight, or the last one.
        self.turn: TurnProgress | None = None
        #: Inputs written to the current process (0: its output is unsolicited).
        self.inputs = 0

    def begin_turn(self, number: int) -> TurnProgress:
        """A new turn is in flight (the previous one must have ended)."""
        self.turn = TurnProgress(number)
        return self.turn

    def input_sent(self) -> None:
        """One input was written to the current process."""
        self.inputs += 1

    def new_process(self) -> None:
        """A new process speaks: nothing was written to it yet."""
        self.inputs = 0

    def fail_current(self, code: str, message: str) -> list[Event]:
        """The failure that ends the turn in flight, to be applied; nothing when none is in flight."""
        turn = self.turn
        if turn is None or turn.terminal is not None:
            return []
        return [TurnFailed(code=code, message=message)]

    def at_exit(self, status: ExitStatus, *, ours: bool = True, reason: str | None = None) -> list[Event]:
        """What the process's exit means for the turn in flight, then the exit itself.

        ``ours`` is False when the turn in flight was written to another (a
        respawned) process: this exit then ends nothing.  ``reason`` replaces
        the ``exit_before_result`` message (see :func:`exit_before_result`).
        """
        final: list[Event] = []
        turn = self.turn
        if turn is not None and turn.terminal is None and ours:
            if turn.cancel_requested:
                final.extend(self.fail_current(turn.cancel_code, turn.cancel_message))
            elif status.requested:
                final.extend(self.fail_current("turn_cancelled", "the turn was cancelled"))
            else:
                final.append(exit_before_result(status, reason))
        final.append(ProcessExited(returncode=status.returncode, signal=status.signal, requested=status.requested))
        return final

    def apply(self, events: Sequence[Event]) -> tuple[list[Event], list[Event], list[ControlRequest]]:
        """Apply the rules to one chunk's events: (for sinks, for the turn in flight, control requests)."""
        turn = self.turn
        live = turn is not None and turn.terminal is None
        if self.inputs and {*map(type, events)} == _ONLY_TEXT:
            # The hot path: a chunk of text deltas, nothing to rule on (the types
            # gathered in C: a Python loop over the chunk was 1.6% of a delta run).
            batch = events if isinstance(events, list) else list(events)
            return batch, batch if live else [], []
        out: list[Event] = []
        for_turn: list[Event] = []
        controls: list[ControlRequest] = []
        inputs = self.inputs
        for ev in events:
            if inputs and type(ev) is TextDelta:  # the hot path, inline
                out.append(ev)
                if live:
                    for_turn.append(ev)
                continue
            kept = self._rule(ev, turn if live else None)
            if kept is None:
                continue
            if isinstance(kept, ControlRequest):
                controls.append(kept)
            out.append(kept)
            if live:
                for_turn.append(kept)
                if isinstance(kept, (TurnCompleted, TurnFailed)):
                    live = False
        return out, for_turn, controls

    def _rule(self, ev: Event, turn: TurnProgress | None) -> Event | None:
        """One event as it goes out (``None``: dropped); ``turn`` is the turn in flight."""
        if type(ev) is TextDelta:
            if self.inputs == 0:
                return Diagnostic(code="output_before_input", detail="text before the first input", raw=ev.raw)
            return ev
        if isinstance(ev, (Diagnostic, ProcessExited, TurnStarted)):
            return ev
        if self.inputs == 0 and not isinstance(ev, TurnFailed):
            return Diagnostic(code="output_before_input", detail=f"{ev.type} before the first input", raw=ev.raw)
        match ev:
            case SessionStarted():
                return self._session(ev)
            case TurnCompleted() | TurnFailed():
                if turn is None:
                    return Diagnostic(
                        code="duplicate_terminal_event", detail=f"{ev.type} with no turn in flight", raw=ev.raw
                    )
                if isinstance(ev, TurnFailed) and turn.cancel_requested and ev.code != turn.cancel_code:
                    # The agent ended the turn because it was interrupted: say so in one code.
                    ev = TurnFailed(
                        code=turn.cancel_code,
                        message=f"{turn.cancel_message} (the agent said {ev.code})",
                        usage=ev.usage,
                        raw=ev.raw,
                    )
                turn.terminal = ev
                return ev
            case _:
                return ev

    def _session(self, ev: SessionStarted) -> Event | None:
        sid = ev.session_id
        if not isinstance(sid, str) or not is_valid_session_id(sid):
            return Diagnostic(code="invalid_session_id", detail="session id has the wrong shape", raw=ev.raw)
        if self.session_id is None:
            self.session_id = sid
            if ev.model:
                self.model = ev.model
            return ev
        if sid == self.session_id:
            return None
        return Diagnostic(
            code="session_id_changed",
            detail="the agent reported a different session id; the first one is kept",
            raw=ev.raw,
        )


class ConversationOwner:
    """The engine's owner for one conversation (see the module doc); a :class:`~agentrt.lowlevel.ProcessOwner`."""

    __slots__ = (
        "_conv",
        "_cwd",
        "_first_output",
        "_internal",
        "_parent_env",
        "_seq",
        "_term_grace",
        "fanout",
        "tap_sources",
    )

    def __init__(
        self,
        conv: Conversation,
        *,
        cwd: str | None,
        parent_env: Mapping[str, str],
        term_grace: float | None,
        first_output: float | None,
    ) -> None:
        self._conv = conv
        self._cwd = cwd
        self._parent_env = parent_env
        self._term_grace = term_grace
        self._first_output = first_output
        #: The attached sinks that record raw bytes, asked for a tap at every spawn (a tuple: most have none).
        self.tap_sources: tuple[TapSource, ...] = ()
        self._seq = 0  # the next batch's first sequence number
        self._internal: list[Event] = []  # the conversation's own diagnostics (a failed sink, a control answer's)
        #: The conversation's sinks, each fed by its own task.
        self.fanout = Fanout(conv._nursery, on_failure=self._internal.append, close_timeout=CLOSE_TIMEOUT)

    # -- what each process is ------------------------------------------------
    async def launch(self, resume: str | None, codec: HostCodec) -> ProcessSpec:
        """The next process's spec (raises as :meth:`LaunchSpec.check_executable` does)."""
        launch = self._conv.launch
        launch.check_executable()
        spec = launch.process_spec(
            self._conv.dialect,
            resume=resume,
            cwd=self._cwd,
            parent_env=self._parent_env,
            shutdown_line=codec.encode_shutdown(),
        )
        return spec if self._term_grace is None else attrs.evolve(spec, term_grace=self._term_grace)

    def new_codec(self, resume: str | None) -> HostCodec:
        """A fresh host codec for the next process, started."""
        codec = self._conv.dialect.host_codec()
        # The working directory a protocol is told (ACP's session/new wants it absolute).
        cwd = os.path.abspath(self._cwd) if self._cwd else os.getcwd()
        codec.start(resume=resume, model=self._conv.launch.model, cwd=cwd)
        return codec

    def probe(self) -> ProtocolProbe:
        """The process's protocol probe (its output until the dialect recognises a line)."""
        launch = self._conv.launch
        return ProtocolProbe(launch.protocol, launch.executable, self._first_output)

    def tap(self, process: AgentProcess, number: int) -> RawTap | None:
        """The raw tap of process ``number``: every tap source's, or ``None`` when none records."""
        if not self.tap_sources:
            return None
        conv = self._conv
        info = TapInfo(conversation_id=conv.id, dialect=conv.dialect.name, process=number, pid=process.pid)
        return tap_all([tap for source in self.tap_sources if (tap := source.open_tap(info)) is not None])

    # -- what it does, for the live turn -------------------------------------
    def idle(self) -> bool:
        """No live turn: nothing waits on the output, so the read loop may park."""
        turn = self._conv._turn
        return turn is None or turn.progress.terminal is not None

    async def on_spawn(self, process: AgentProcess) -> None:
        """A new process: the turn rules start afresh."""
        self._conv._rules.new_process()

    async def on_events(self, events: Sequence[Event]) -> None:
        """A chunk's events, or the conversation's own: through the turn rules to the turn and the sinks."""
        conv = self._conv
        state = conv._turn
        out, for_turn, controls = conv._rules.apply(events)
        if self._internal:
            # A new list: `out` may be the very list handed to the turn's consumer.
            out = out + self._internal
            self._internal.clear()
        if not out:
            return
        batch = EventBatch(
            source=conv.id, first_seq=self._seq, mono=trio.current_time(), wall=time.time(), events=tuple(out)
        )
        self._seq += len(out)
        if state is not None and for_turn:
            state.send.send_nowait(for_turn)
            if state.progress.terminal is not None:
                state.ended.set()
                state.send.close()
                if conv._turn is state:
                    conv._turn = None
        await self.fanout.send(batch)
        for req in controls:
            conv._nursery.start_soon(self._answer_control, req)

    async def fail(self, code: str, message: str) -> None:
        """End the turn in flight, if any, with this failure."""
        await self.on_events(self._conv._rules.fail_current(code, message))

    async def _answer_control(self, req: ControlRequest) -> None:
        conv = self._conv
        proc, codec = conv._engine.process, conv._engine.codec
        if proc is None or codec is None:
            return
        await answer_control(req, codec=codec, policy=conv._policy, send=proc.send, report=self._internal.append)

    async def close_sinks(self, deadline: float) -> None:
        """Deliver what is still held, then close the fan-out, all by ``deadline`` (shielded by the caller)."""
        with trio.move_on_at(deadline):
            # Whatever the pump could not deliver is lost only if a sink hangs past the deadline.
            if self._internal:
                await self.on_events([])
        await self.fanout.aclose(deadline=deadline)

    async def on_send_error(self, error: AgentrtError) -> None:
        """A write the codec owed the agent failed: the live turn fails with its code."""
        await self.fail(error.code, error.detail or error.code)

    async def on_mismatch(self, failure: TurnFailed) -> None:
        """No recognised output within the first-output bound: the live turn fails ``protocol_mismatch``."""
        await self.fail(failure.code, failure.message)

    async def on_oversize(self, process: AgentProcess, before: list[Event]) -> bool:
        """A line past the cap: stop the agent (a next turn must not be written to it) and fail the turn."""
        with trio.CancelScope(shield=True):
            await process.stop()
        conv = self._conv
        await self.on_events(
            before
            + [Diagnostic(code="runtime_output_oversize", detail="stdout line exceeded 4 MiB; stopping the agent")]
            + conv._rules.fail_current("runtime_output_oversize", "the agent's output exceeded 4 MiB without a newline")
        )
        return False

    async def on_exit(self, end: ProcessEnd) -> None:
        """How the process ended decides the live turn's fate."""
        conv = self._conv
        if end.failure is not None:
            await self.fail(end.failure.code, end.failure.detail or end.failure.code)
        status, turn = end.status, conv._turn
        ours = turn is not None and turn.proc is end.process
        reason = None
        ending = turn is not None and ours and turn.progress.live
        if ending and turn is not None and not (turn.progress.cancel_requested or status.requested):
            reason = await exit_reason(end.process, exit_how(status))  # the agent's last stderr lines say why
        await self.on_events(conv._rules.at_exit(status, ours=ours, reason=reason))
