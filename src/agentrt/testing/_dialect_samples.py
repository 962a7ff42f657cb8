"""The samples ``check_dialect`` feeds every dialect: hostile JSON values, event scripts, turns."""

from __future__ import annotations

from typing import Any

from ..dialect import DocumentBlock, ImageBlock, TextBlock, Turn
from ..events import Event, SessionStarted, TextDelta, ToolUse, TurnCompleted, TurnFailed, Usage

__all__ = ["DEFAULT_SCRIPTS", "DEFAULT_TURNS", "NASTY_VALUES"]

#: JSON values a decoder meets sooner or later; none of them may make it raise.
NASTY_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    2**63,
    1.5,
    1e308,
    "",
    "x",
    "\u0000",
    "\ufffd",
    "é" * 3,
    [],
    [None],
    {},
    {"type": None},
    {"type": 1},
    {"type": ""},
    {"type": []},
    {"type": {}},
    {"type": "\ufffd"},
    {"type": "result"},
    {"type": "result", "is_error": True},
    {"type": "result", "usage": []},
    {"type": "result", "usage": {"input_tokens": "12", "output_tokens": True}},
    {"type": "system"},
    {"type": "system", "subtype": "init"},
    {"type": "system", "subtype": None},
    {"type": "system", "subtype": "init", "session_id": 5},
    {"type": "assistant"},
    {"type": "assistant", "message": None},
    {"type": "assistant", "message": {"content": "text"}},
    {"type": "assistant", "message": {"content": [None, 1, "x", {"type": "tool_use"}]}},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": None}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result"}]}},
    {"type": "stream_event"},
    {"type": "stream_event", "event": []},
    {"type": "stream_event", "event": {"type": "content_block_delta", "delta": None}},
    {
        "type": "stream_event",
        "event": {"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": 1}},
    },
    {
        "type": "stream_event",
        "event": {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use"}},
    },
    {
        "type": "stream_event",
        "event": {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a"'},
        },
    },
    {"type": "stream_event", "event": {"type": "content_block_stop", "index": 0}},
    {"type": "content_block_delta", "index": -1, "delta": {"type": "text_delta", "text": ""}},
    {"type": "content_block_start", "content_block": None},
    {"type": "message_delta", "usage": 3},
    {"type": "rate_limit_event", "rate_limit_info": "rejected"},
    {"type": "control_request"},
    {"type": "control_request", "request_id": 1, "request": {"subtype": "can_use_tool"}},
    {"type": "control_request", "request_id": "r", "request": []},
    {"type": "shutdown"},
    {"type": "user", "message": {"role": "user", "content": 7}},
)

_SID = "session-0123456789"

#: Event scripts every built-in dialect can express (agent encode → host decode gives them back).
DEFAULT_SCRIPTS: tuple[tuple[Event, ...], ...] = (
    (
        SessionStarted(session_id=_SID, model="model-a"),
        TextDelta(text="Hello, "),
        TextDelta(text="world. ✓ 日本語"),
        TurnCompleted(session_id=_SID, usage=Usage(input_tokens=12, output_tokens=8), result="Hello"),
    ),
    (
        SessionStarted(session_id=_SID, model=None),
        TextDelta(text="I will read it."),
        ToolUse(id="toolu_1", name="Read", input={"file_path": "/tmp/a b/c.py"}, summary="Reading c.py"),
        TextDelta(text="Done."),
        TurnCompleted(
            session_id=_SID,
            usage=Usage(input_tokens=3, output_tokens=1, cache_read_input_tokens=100),
            result=None,
        ),
        TextDelta(text="second turn"),
        TurnFailed(code="provider_http_500", message="the provider failed", usage=None),
    ),
    (
        SessionStarted(session_id=_SID, model="m"),
        TurnFailed(code="provider_timeout", message=""),
    ),
)

#: Turns every built-in dialect can carry.
DEFAULT_TURNS: tuple[Turn, ...] = (
    Turn.text("hello"),
    Turn.text(""),
    Turn.text('quotes " and \\ and \n newlines, ünïcödé, emoji 🙂, \u2028 separators'),
    Turn(
        content=(
            ImageBlock(media_type="image/png", data="iVBORw0KGgo="),
            DocumentBlock(media_type="application/pdf", data="JVBERi0xLjQ="),
            TextBlock(text="describe these"),
        )
    ),
)
