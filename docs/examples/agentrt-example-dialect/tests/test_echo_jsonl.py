"""The example dialect passes agentrt's conformance suite, loaded through its entry point."""

from __future__ import annotations

from agentrt import Plugins
from agentrt.dialect import TextBlock, Turn
from agentrt.events import SessionStarted, TextDelta, TurnCompleted, TurnFailed
from agentrt.testing import check_dialect

# What echo-jsonl can express; the default scripts use tool calls and usage, which it has not.
SCRIPTS = [
    [SessionStarted(session_id="s-1"), TextDelta(text="hel"), TextDelta(text="lo"), TurnCompleted()],
    [SessionStarted(session_id="s-2"), TurnFailed(code="echo_broken", message="it broke")],
]
TURNS = [Turn.text("hi"), Turn(content=(TextBlock(text="a"), TextBlock(text="b"))), Turn.text("")]
SAMPLES = [
    {"event": "hello", "session": "s-1"},
    {"event": "text", "text": "hello"},
    {"event": "done"},
    {"event": "error", "code": "echo_broken", "message": "it broke"},
    {"event": "something-new", "x": [1, 2]},
]


def test_conformance() -> None:
    # Load it the way agentrt does: from the installed distribution's entry point.
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "example-dialect"})
    check_dialect(lambda: plugins.dialect("echo-jsonl"), samples=SAMPLES, scripts=SCRIPTS, turns=TURNS)
