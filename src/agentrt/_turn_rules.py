"""The turn rules, whatever the dialect: a synchronous, I/O-free state machine.

:class:`TurnRules` sees every event decoded from one agent process's output
(and the runtime's own) and decides what reaches the sinks, what belongs to
the turn in flight and which control requests need an answer:

* exactly one terminal event (``turn_completed`` / ``turn_failed``) per turn;
  a second one is a ``duplicate_terminal_event`` diagnostic;
* output before the first input is an ``output_before_input`` diagnostic and
  belongs to no turn;
* the first valid ``session_started`` establishes the session; a repeat with
  the same id is dropped, another id is a ``session_id_changed`` diagnostic,
  an id of the wrong shape is ``invalid_session_id`` and never used to resume;
* a turn the caller cancelled that the agent ends with another failure code
  ends with the cancel's own code, ``turn_cancelled`` (or ``turn_timeout``
  for a timeout), the agent's code in the message.

The conversation feeds it and does the I/O; the rules hold no trio objects,
so they are table-tested directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._launch import is_valid_session_id
from ._process import ExitStatus
from .events import (
    ControlRequest,
    Diagnostic,
    Event,
    ProcessExited,
    SessionStarted,
    TextDelta,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)

__all__ = ["TurnProgress", "TurnRules", "exit_before_result"]


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


def exit_how(status: ExitStatus) -> str:
    """How the process ended, as the ``exit_before_result`` message says it: ``code=N`` or ``signal=N``."""
    return f"signal={status.signal}" if status.signal is not None else f"code={status.returncode}"


def exit_before_result(status: ExitStatus, message: str | None = None) -> TurnFailed:
    """The failure of a turn whose agent exited before the turn's terminal event.

    ``message`` is the whole message when the caller knows more (the agent's
    last stderr lines); by default it names the exit code or signal.
    """
    return TurnFailed(
        code="exit_before_result", message=message or f"the agent exited before its result ({exit_how(status)})"
    )


# The hot path's test: every event of a chunk is a text delta.
_ONLY_TEXT = frozenset({TextDelta})


class TurnRules:
    """The turn state machine of one conversation (see the module docstring).

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
