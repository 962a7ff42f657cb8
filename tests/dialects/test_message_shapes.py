"""The project's message-shape fixture agrees with the installed Claude Agent SDK's own types.

``plugins/agentrt-stream-json/tests/fixtures/claude-code/message-shapes.jsonl`` is written by the project
(not recorded): the
message shapes the real CLI does not print against the loopback fake (control requests, rate-limit
events, every result subtype, future system subtypes).  So that a hand-written shape cannot drift
from the protocol, every line is checked here against the SDK: its message parser for the message
types it models, its ``TypedDict`` definitions (validated with pydantic) for control requests and
responses.
"""

from __future__ import annotations

import types
import typing
from collections import Counter
from typing import Any

import pytest

sdk_types = pytest.importorskip(
    "claude_agent_sdk.types", reason="claude-agent-sdk (requirements-dev.txt) checks the shapes"
)
parser = pytest.importorskip("claude_agent_sdk._internal.message_parser", reason="the SDK's message parser checks them")


def conforms(value: Any, tp: Any) -> bool:
    """``value`` (parsed JSON) has the type ``tp`` of the SDK's annotations: TypedDicts exactly (every
    required key, no unknown key), literals, unions, lists, dicts, str, int, bool, None, Any."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True
    if tp is None or tp is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg) for arg in args)
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return (
            isinstance(value, dict)
            and tp.__required_keys__ <= value.keys() <= hints.keys()
            and all(conforms(v, hints[k]) for k, v in value.items())
        )
    if origin is list:
        return isinstance(value, list) and all(conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(conforms(v, args[1]) for v in value.values())
    if tp in (str, bool):
        return type(value) is tp
    if tp in (int, float):
        return type(value) in (int, float) if tp is float else type(value) is int
    raise AssertionError(f"no rule for {tp!r}")


PARSED = {
    "user": sdk_types.UserMessage,
    "assistant": sdk_types.AssistantMessage,
    "system": sdk_types.SystemMessage,
    "result": sdk_types.ResultMessage,
    "rate_limit_event": sdk_types.RateLimitEvent,
    "conversation_reset": sdk_types.ConversationResetMessage,
}
TYPED = {"control_request": sdk_types.SDKControlRequest, "control_response": sdk_types.SDKControlResponse}


def test_every_shape_is_what_the_sdk_reads(message_shapes: list[Any]) -> None:
    kinds = Counter(obj["type"] for obj in message_shapes)
    # the fixture covers each type the SDK reads, and nothing the SDK does not know
    assert set(kinds) == {*PARSED, *TYPED, "control_cancel_request"}
    for number, obj in enumerate(message_shapes, start=1):
        kind = obj["type"]
        if kind in PARSED:
            message = parser.parse_message(obj)
            assert isinstance(message, PARSED[kind]), (number, message)
        elif kind in TYPED:
            assert conforms(obj, TYPED[kind]), (number, obj)
        else:  # the SDK reads only request_id of a cancel (claude_agent_sdk/_internal/query.py)
            assert set(obj) == {"type", "request_id"} and isinstance(obj["request_id"], str)


def test_the_result_subtypes_and_errors_are_covered(message_shapes: list[Any]) -> None:
    results = [obj for obj in message_shapes if obj["type"] == "result"]
    subtypes = {obj["subtype"] for obj in results}
    assert subtypes == {"success", "error_max_turns", "error_during_execution", "error_max_budget_usd"}
    # the traps: an error reported with subtype success, with and without an HTTP status
    assert {obj.get("api_error_status") for obj in results if obj["is_error"] and obj["subtype"] == "success"} == {
        529,
        None,
    }


def test_a_shape_the_sdk_refuses_is_caught() -> None:
    # The checks above can fail: a request without its id, a missing required key, an unknown key,
    # a wrong literal; a result without its session.
    request = {"subtype": "hook_callback", "callback_id": "h", "input": {}, "tool_use_id": None}
    good = {"type": "control_request", "request_id": "r", "request": request}
    assert conforms(good, sdk_types.SDKControlRequest)
    for bad in (
        {"type": "control_request", "request": request},
        {**good, "request": {k: v for k, v in request.items() if k != "input"}},
        {**good, "request": {**request, "extra": 1}},
        {**good, "type": "control_requests"},
        {**good, "request_id": 7},
    ):
        assert not conforms(bad, sdk_types.SDKControlRequest), bad
    with pytest.raises(parser.MessageParseError):
        parser.parse_message({"type": "result", "subtype": "success", "duration_ms": 1})
