"""The turn rules as a pure object: table tests of :class:`agentrt.lowlevel.TurnRules`.

No process, no trio: each row feeds events to fresh rules and checks what
reaches the sinks, what belongs to the turn and which control requests need
an answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt.events import (
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
from agentrt.lowlevel import ExitStatus, TurnRules


def _rules(*, inputs: int = 1, turn: bool = True, cancel: bool = False) -> TurnRules:
    rules = TurnRules(model="launch-model")
    if turn:
        rules.begin_turn(1).cancel_requested = cancel
    for _ in range(inputs):
        rules.input_sent()
    return rules


def _shape(events: list[Event]) -> list[str]:
    """Each event as ``type`` or ``diagnostic:code`` / ``turn_failed:code``."""
    out = []
    for ev in events:
        if isinstance(ev, (Diagnostic, TurnFailed)):
            out.append(f"{ev.type}:{ev.code}")
        else:
            out.append(ev.type)
    return out


CONTROL = ControlRequest(request_id="r1", subtype="can_use_tool", request={"tool_name": "Bash"})

# (name, rules setup, events in, sinks see, the turn sees)
TABLE: list[tuple[str, dict[str, Any], list[Event], list[str], list[str]]] = [
    (
        "one terminal per turn: a second one is a diagnostic, outside the turn",
        {},
        [TurnCompleted(), TurnCompleted()],
        ["turn_completed", "diagnostic:duplicate_terminal_event"],
        ["turn_completed"],
    ),
    (
        "a failure after completion is a duplicate too",
        {},
        [TextDelta(text="a"), TurnCompleted(), TurnFailed(code="x")],
        ["text_delta", "turn_completed", "diagnostic:duplicate_terminal_event"],
        ["text_delta", "turn_completed"],
    ),
    (
        "a terminal with no turn in flight is a duplicate",
        {"turn": False},
        [TurnCompleted()],
        ["diagnostic:duplicate_terminal_event"],
        [],
    ),
    (
        "output before input: text becomes a diagnostic, in no turn",
        {"inputs": 0, "turn": False},
        [TextDelta(text="hi")],
        ["diagnostic:output_before_input"],
        [],
    ),
    (
        "output before input: any event but a failure becomes a diagnostic",
        {"inputs": 0},
        [SessionStarted(session_id="s1"), TurnCompleted()],
        ["diagnostic:output_before_input", "diagnostic:output_before_input"],
        ["diagnostic:output_before_input", "diagnostic:output_before_input"],
    ),
    (
        "a failure before any input still ends the turn (a spawn failure)",
        {"inputs": 0},
        [TurnFailed(code="spawn_failed")],
        ["turn_failed:spawn_failed"],
        ["turn_failed:spawn_failed"],
    ),
    (
        "the runtime's own events pass before input",
        {"inputs": 0},
        [TurnStarted(turn=1, prompt="p"), Diagnostic(code="d"), ProcessExited(returncode=0)],
        ["turn_started", "diagnostic:d", "process_exited"],
        ["turn_started", "diagnostic:d", "process_exited"],
    ),
    (
        "session: a repeat of the same id is dropped, another id is a diagnostic",
        {},
        [SessionStarted(session_id="s1"), SessionStarted(session_id="s1"), SessionStarted(session_id="s2")],
        ["session_started", "diagnostic:session_id_changed"],
        ["session_started", "diagnostic:session_id_changed"],
    ),
    (
        "session: an id of the wrong shape is a diagnostic",
        {},
        [SessionStarted(session_id="not a valid id!")],
        ["diagnostic:invalid_session_id"],
        ["diagnostic:invalid_session_id"],
    ),
    (
        "cancel mapping: the agent's failure of a cancelled turn is turn_cancelled",
        {"cancel": True},
        [TurnFailed(code="interrupted")],
        ["turn_failed:turn_cancelled"],
        ["turn_failed:turn_cancelled"],
    ),
    (
        "cancel mapping: a completion stays a completion",
        {"cancel": True},
        [TurnCompleted()],
        ["turn_completed"],
        ["turn_completed"],
    ),
    (
        "no cancel: the agent's failure code stands",
        {},
        [TurnFailed(code="interrupted")],
        ["turn_failed:interrupted"],
        ["turn_failed:interrupted"],
    ),
    (
        "events after the terminal go to the sinks only",
        {},
        [TurnCompleted(), TextDelta(text="late"), CONTROL],
        ["turn_completed", "text_delta", "control_request"],
        ["turn_completed"],
    ),
]


@pytest.mark.parametrize(("setup", "events", "sinks", "turn"), [row[1:] for row in TABLE], ids=[r[0] for r in TABLE])
def test_turn_rules_table(setup: dict[str, Any], events: list[Event], sinks: list[str], turn: list[str]) -> None:
    rules = _rules(**setup)
    out, for_turn, _ = rules.apply(events)
    assert _shape(out) == sinks
    assert _shape(for_turn) == turn


def test_the_first_valid_session_id_is_kept_with_its_model() -> None:
    rules = _rules()
    rules.apply([SessionStarted(session_id="bad id"), SessionStarted(session_id="s1", model="m1")])
    rules.apply([SessionStarted(session_id="s2", model="m2")])
    assert (rules.session_id, rules.model) == ("s1", "m1")


def test_the_launch_model_stands_until_the_agent_names_one() -> None:
    rules = _rules()
    rules.apply([SessionStarted(session_id="s1")])
    assert (rules.session_id, rules.model) == ("s1", "launch-model")


def test_control_requests_are_returned_to_answer_and_still_reach_the_sinks() -> None:
    out, for_turn, controls = _rules().apply([TextDelta(text="a"), CONTROL])
    assert controls == [CONTROL]
    assert out == for_turn == [TextDelta(text="a"), CONTROL]


def test_a_chunk_of_text_deltas_passes_through_untouched() -> None:
    chunk: list[Event] = [TextDelta(text=str(i)) for i in range(5)]
    out, for_turn, controls = _rules().apply(chunk)
    assert out is chunk and for_turn is chunk and controls == []
    out, for_turn, _ = _rules(turn=False).apply(chunk)
    assert out is chunk and for_turn == []


@pytest.mark.parametrize("where", [0, 2, 5])
def test_one_other_event_anywhere_in_a_chunk_of_deltas_takes_the_rules(where: int) -> None:
    # The hot path is only for a chunk of text deltas alone: wherever the terminal
    # stands, it is ruled on (recorded on the turn; nothing after it is the turn's).
    chunk: list[Event] = [TextDelta(text=str(i)) for i in range(5)]
    chunk.insert(where, TurnCompleted(result="ok"))
    rules = _rules()
    turn = rules.turn
    out, for_turn, _ = rules.apply(chunk)
    assert out is not chunk and out == chunk
    assert for_turn == chunk[: where + 1]
    assert turn is not None and turn.terminal == TurnCompleted(result="ok")


def test_an_empty_chunk_is_nothing_either_way() -> None:
    assert _rules().apply([]) == ([], [], [])


def test_the_terminal_is_recorded_on_the_turn() -> None:
    rules = _rules()
    turn = rules.turn
    assert turn is not None and turn.live
    rules.apply([TurnCompleted(result="ok")])
    assert turn.terminal == TurnCompleted(result="ok") and not turn.live
    assert rules.fail_current("x", "y") == []


@pytest.mark.parametrize(
    ("status", "cancel", "expected"),
    [
        (ExitStatus(returncode=3, signal=None, requested=False), False,
         ["turn_failed:exit_before_result", "process_exited"]),
        (ExitStatus(returncode=None, signal=9, requested=False), False,
         ["turn_failed:exit_before_result", "process_exited"]),
        (ExitStatus(returncode=0, signal=None, requested=True), False,
         ["turn_failed:turn_cancelled", "process_exited"]),
        (ExitStatus(returncode=0, signal=None, requested=False), True,
         ["turn_failed:turn_cancelled", "process_exited"]),
    ],
)  # fmt: skip
def test_exit_before_the_terminal_fails_the_turn(status: ExitStatus, cancel: bool, expected: list[str]) -> None:
    rules = _rules(cancel=cancel)
    final = rules.at_exit(status)
    assert _shape(final) == expected
    out, _, _ = rules.apply(final)
    assert _shape(out) == expected
    assert rules.turn is not None and rules.turn.terminal is not None


def test_exit_before_result_names_the_code_or_the_signal() -> None:
    by_code = _rules().at_exit(ExitStatus(returncode=3, signal=None, requested=False))[0]
    by_signal = _rules().at_exit(ExitStatus(returncode=None, signal=9, requested=False))[0]
    assert isinstance(by_code, TurnFailed) and "code=3" in by_code.message
    assert isinstance(by_signal, TurnFailed) and "signal=9" in by_signal.message


def test_exit_after_the_terminal_is_only_the_exit() -> None:
    rules = _rules()
    rules.apply([TurnCompleted()])
    assert _shape(rules.at_exit(ExitStatus(returncode=0, signal=None, requested=False))) == ["process_exited"]


def test_a_new_process_speaks_before_input_again() -> None:
    rules = _rules()
    rules.new_process()
    out, _, _ = rules.apply([TextDelta(text="x")])
    assert _shape(out) == ["diagnostic:output_before_input"]


# --- any interleaving: the invariants hold ---

_EVENTS = st.sampled_from(
    [
        TextDelta(text="t"),
        TurnCompleted(),
        TurnFailed(code="agent_error"),
        SessionStarted(session_id="s1"),
        SessionStarted(session_id="s2"),
        SessionStarted(session_id="bad id"),
        CONTROL,
        Diagnostic(code="d"),
    ]
)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("events"), st.lists(_EVENTS, max_size=6)),
        st.tuples(st.just("begin"), st.none()),
        st.tuples(st.just("input"), st.none()),
        st.tuples(st.just("cancel"), st.none()),
        st.tuples(st.just("respawn"), st.none()),
        st.tuples(st.just("exit"), st.booleans()),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_any_interleaving_keeps_one_terminal_per_turn_and_one_session(ops: list[tuple[str, Any]]) -> None:
    rules = TurnRules()
    turns = 0
    per_turn: dict[int, list[Event]] = {}
    for op, arg in ops:
        turn = rules.turn
        if op == "begin":
            if turn is not None and turn.live:
                continue  # the conversation refuses a second turn in flight
            turns += 1
            rules.begin_turn(turns)
            continue
        if op == "input":
            rules.input_sent()
            continue
        if op == "cancel":
            if turn is not None:
                turn.cancel_requested = True
            continue
        if op == "respawn":
            rules.new_process()
            continue
        events = rules.at_exit(ExitStatus(returncode=1, signal=None, requested=arg)) if op == "exit" else arg
        out, for_turn, controls = rules.apply(events)
        assert all(any(o is f for o in out) for f in for_turn)  # the turn's events all reach the sinks
        assert controls == [ev for ev in out if isinstance(ev, ControlRequest)]
        if turn is not None:
            per_turn.setdefault(turn.number, []).extend(for_turn)
    for number, events in per_turn.items():
        terminals = [ev for ev in events if isinstance(ev, (TurnCompleted, TurnFailed))]
        assert len(terminals) <= 1, number
        if terminals:
            assert events[-1] is terminals[0]  # nothing of a turn after its terminal
    assert rules.session_id in (None, "s1", "s2")
