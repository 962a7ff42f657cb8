"""The stream-json dialect beyond the captures: SDK samples, control requests, edge cases, agent side."""

from __future__ import annotations

import importlib
import json
from typing import Any

import orjson
import pytest

import agentrt_stream_json
from agentrt import AgentrtError, Plugins
from agentrt.dialect import InputError, Shutdown, Turn
from agentrt.events import (
    ControlRequest,
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.permissions import PermissionDecision
from agentrt_stream_json.codec import COMPAT_ARGS, StreamJsonDialect, permission_response


def host() -> Any:
    return StreamJsonDialect().host_codec()


def test_registration_and_compat_args() -> None:
    plugins = Plugins()
    plugins.register(agentrt_stream_json, name="stream-json")
    dialect = plugins.dialect("stream-json")
    assert dialect.name == "stream-json"
    assert (
        dialect.compat_args
        == COMPAT_ARGS
        == ("--output-format", "stream-json", "--input-format", "stream-json", "--print", "--verbose")
    )


def test_host_codec_stands_alone_on_the_shared_wire_module() -> None:
    # stream-json shares awp-jsonl's wire shapes through a public module, not by subclassing its codec.
    import ast
    import inspect
    from pathlib import Path

    from agentrt_awp_jsonl import anthropic
    from agentrt_awp_jsonl.codec import AwpHostCodec
    from agentrt_stream_json import codec

    assert not issubclass(codec.StreamJsonHostCodec, AwpHostCodec)
    package = Path(inspect.getfile(codec)).parent
    imported = {
        node.module
        for path in package.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agentrt_awp_jsonl")
    }
    assert imported == {"agentrt_awp_jsonl.anthropic"}
    codec_a, codec_b = host(), host()
    assert codec_a._dispatch is not codec_b._dispatch
    assert codec_a._dispatch["user"] is anthropic.tool_results


def test_input_is_the_awp_user_line() -> None:
    from agentrt_awp_jsonl.codec import AwpJsonlDialect

    turn = Turn.text("hello")
    assert host().encode_turn(turn) == AwpJsonlDialect().host_codec().encode_turn(turn)
    # the line the capture's harness sent to the real CLI
    assert host().encode_turn(turn) == (
        b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}\n'
    )


# -- every message shape, by hand ----------------------------------------------------------------
# fixtures/claude-code/message-shapes.jsonl: the project's fixture of the message shapes the
# Agent SDK's parser knows (control requests, rate-limit events, every result subtype).

ERRORS_43 = "Bash failed: exit status 2\nWrite refused: read-only file system"
READ_NOTES = ("Read", {"file_path": "/work/notes.md"}, "Reading notes.md")
SDK_EXPECTED: list[list[tuple[Any, ...]]] = [
    [("session", "sess-shapes", "claude-shape")],  # 1
    [("raw", "system/start")],
    [("status", "task_started", "Indexing the repository")],
    [("status", "task_progress", "Read 40 of 120 files")],
    [("status", "task_notification", "Index built")],  # 5
    [("raw", "system/task_updated")],
    [("raw", "system/background_tasks_changed")],
    [("raw", "system/session_state_changed")],
    [("raw", "system/not_yet_known")],
    [("raw", "system/hook_started")],  # 10
    [("raw", "system/hook_response")],
    [("raw", "user")],  # string content: a replayed user message, not a tool result
    [("raw", "user")],
    [("raw", "user")],
    [("tool_result", "toolu_r1", "line 1\nline 2", False)],  # 15
    [("tool_result", "toolu_r2", "No such file or directory", True)],
    [("raw", "user")],
    [("text", "All tests pass.")],
    [("text", "I will open the notes."), ("tool_use", "toolu_a1", *READ_NOTES)],
    [("text", "Reading it."), ("tool_use", "toolu_a2", *READ_NOTES)],  # 20
    [("thinking", "The notes list two steps."), ("text", "There are two steps.")],
    [("raw", "assistant/server_tool_use")],
    [("raw", "assistant/advisor_tool_result")],
    [("text", "ok")],
    [("text", "Reading it."), ("tool_use", "toolu_a2", *READ_NOTES)],  # 25
    [("status", "api_error", "authentication_failed")],
    [("status", "api_error", "unknown")],
    [("text", "Hi there")],
    [("status", "rate_limit", "rate_limit_warning")],
    [("status", "rate_limit", "rate_limited")],  # 30
    [("raw", "conversation_reset")],
    [("control", "mcp_1", "mcp_message")],
    [("control", "perm_1", "can_use_tool")],
    [("control", "hook_1", "hook_callback")],
    [("control", "mcp_2", "mcp_message")],  # 35
    [("control", "perm_2", "can_use_tool")],
    [("raw", "control_response")],
    [("raw", "control_cancel_request")],
    [("completed", "sess-shapes", None, None)],
    [("completed", "sess-shapes", None, "All tests pass.")],  # 40
    [("failed", "cc_error_max_budget_usd", "", {"input_tokens": 200, "output_tokens": 20})],
    [("failed", "cc_error_max_turns", "", None)],
    [("failed", "cc_error_during_execution", ERRORS_43, None)],
    [("completed", "sess-shapes", None, "")],
    [("completed", "sess-shapes", {"input_tokens": 12, "output_tokens": 3}, "Hi there")],  # 45
    [("completed", "sess-shapes", None, None)],
    [("failed", "api_error_529", "", None)],
    [("failed", "api_error", "API Error: Stream idle timeout - no chunks received", None)],
]


def _norm(events: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for ev in events:
        if isinstance(ev, TextDelta):
            out.append(("text", ev.text))
        elif isinstance(ev, ThinkingDelta):
            out.append(("thinking", ev.text))
        elif isinstance(ev, SessionStarted):
            out.append(("session", ev.session_id, ev.model))
        elif isinstance(ev, ToolUse):
            out.append(("tool_use", ev.id, ev.name, dict(ev.input), ev.summary))
        elif isinstance(ev, ToolResult):
            out.append(("tool_result", ev.tool_use_id, ev.content, ev.is_error))
        elif isinstance(ev, Status):
            out.append(("status", ev.kind, ev.label))
        elif isinstance(ev, ControlRequest):
            out.append(("control", ev.request_id, ev.subtype))
        elif isinstance(ev, TurnCompleted):
            out.append(("completed", ev.session_id, ev.usage.to_dict() if ev.usage else None, ev.result))
        elif isinstance(ev, TurnFailed):
            out.append(("failed", ev.code, ev.message, ev.usage.to_dict() if ev.usage else None))
        elif isinstance(ev, RawEvent):
            out.append(("raw", ev.name))
        else:
            out.append(("other", type(ev).__name__))
    return out


def test_sdk_samples(message_shapes: list[Any]) -> None:
    samples = message_shapes
    assert len(samples) == len(SDK_EXPECTED) == 48
    for number, (obj, expected) in enumerate(zip(samples, SDK_EXPECTED), start=1):
        assert (number, _norm(host().decode(obj))) == (number, expected)


def test_control_request_keeps_the_request(message_shapes: list[Any]) -> None:
    obj = message_shapes[32]
    (ev,) = host().decode(obj)
    assert ev == ControlRequest(
        request_id="perm_1",
        subtype="can_use_tool",
        request={
            "subtype": "can_use_tool",
            "tool_name": "Write",
            "input": {"file_path": "/work/out.txt", "content": "hello"},
            "permission_suggestions": None,
            "blocked_path": None,
            "tool_use_id": "toolu_w1",
        },
    )
    assert ev.raw is obj


# -- control responses: the Agent SDK's shape ---------------------------------------------------


def _request() -> ControlRequest:
    return ControlRequest(
        request_id="perm_1",
        subtype="can_use_tool",
        request={"subtype": "can_use_tool", "tool_name": "Write", "input": {"file_path": "/x"}},
    )


def test_control_response_allow_fills_in_the_original_input() -> None:
    line = host().encode_control_response(_request(), permission_response(PermissionDecision(allow=True)), None)
    assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "perm_1",
            "response": {"behavior": "allow", "updatedInput": {"file_path": "/x"}},
        },
    }


def test_control_response_allow_with_rewritten_input_and_deny() -> None:
    allow = permission_response(PermissionDecision(allow=True, updated_input={"file_path": "/safe"}))
    line = host().encode_control_response(_request(), allow, None)
    assert orjson.loads(line or b"")["response"]["response"] == {
        "behavior": "allow",
        "updatedInput": {"file_path": "/safe"},
    }
    deny = permission_response(PermissionDecision(allow=False, message="not here"))
    line = host().encode_control_response(_request(), deny, None)
    assert orjson.loads(line or b"") == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "perm_1",
            "response": {"behavior": "deny", "message": "not here"},
        },
    }


def test_control_response_error_and_bad_request() -> None:
    line = host().encode_control_response(_request(), None, "policy timed out")
    assert orjson.loads(line or b"") == {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": "perm_1", "error": "policy timed out"},
    }
    # the raw object is accepted too
    raw = {"type": "control_request", "request_id": "hook_1", "request": {"subtype": "hook_callback"}}
    assert orjson.loads(host().encode_control_response(raw, {}, None) or b"")["response"] == {
        "subtype": "success",
        "request_id": "hook_1",
        "response": {},
    }
    with pytest.raises(AgentrtError) as err:
        host().encode_control_response({"request": {}}, {}, None)
    assert err.value.code == "invalid_control_request"


def test_control_response_is_what_the_sdk_sends(message_shapes: list[Any]) -> None:
    # A control_response line in the envelope the Agent SDK writes (test_message_shapes.py checks it).
    sample = message_shapes[36]
    line = host().encode_control_response(
        {"request_id": "mcp_2", "request": {"subtype": "mcp_message"}},
        {"mcp_response": {"jsonrpc": "2.0", "result": {}}},
        None,
    )
    assert orjson.loads(line or b"") == sample


# -- streaming edge cases ------------------------------------------------------------------------


def _stream(event: dict[str, Any], msg: str | None = "msg_1") -> dict[str, Any]:
    obj: dict[str, Any] = {"type": "stream_event", "event": event, "session_id": "s"}
    if msg is not None:
        obj["api_message_id"] = msg
    return obj


def _delta(text: str, index: int = 0, msg: str | None = "msg_1") -> dict[str, Any]:
    return _stream({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}, msg)


def _assistant(blocks: list[dict[str, Any]], msg: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": msg, "role": "assistant", "content": blocks},
        "session_id": "s",
    }


def _decode(codec: Any, objs: list[Any]) -> list[Event]:
    return [ev for obj in objs for ev in codec.decode(obj)]


def test_only_the_unstreamed_suffix_is_emitted() -> None:
    events = _decode(host(), [_delta("Hel"), _assistant([{"type": "text", "text": "Hello"}])])
    assert [e for e in events if not isinstance(e, RawEvent)] == [TextDelta(text="Hel"), TextDelta(text="lo")]


def test_message_id_from_message_start_when_lines_do_not_carry_it() -> None:
    events = _decode(
        host(),
        [
            _stream({"type": "message_start", "message": {"id": "msg_9"}}, None),
            _delta("a", 0, None),
            _delta("b", 2, None),
            _assistant([{"type": "text", "text": "a"}], "msg_9"),
            _assistant([{"type": "text", "text": "b"}], "msg_9"),
            _assistant([{"type": "text", "text": "other message"}], "msg_10"),
        ],
    )
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta(text="a"),
        TextDelta(text="b", index=2),
        TextDelta(text="other message"),
    ]


def test_mismatch_between_stream_and_message_is_diagnosed_not_duplicated() -> None:
    events = _decode(host(), [_delta("abc"), _assistant([{"type": "text", "text": "xyz"}])])
    assert [type(e) for e in events] == [TextDelta, Diagnostic]
    assert isinstance(events[1], Diagnostic) and events[1].code == "stream_text_mismatch"


def test_state_is_per_turn() -> None:
    codec = host()
    first = _decode(codec, [_delta("same"), {"type": "result", "subtype": "success", "is_error": False}])
    # a new turn re-using the message id (a fake server does) is decoded afresh
    second = _decode(codec, [_assistant([{"type": "text", "text": "same"}])])
    assert first[0] == TextDelta(text="same") and second == [TextDelta(text="same")]


def test_streamed_tool_use_without_assistant_line() -> None:
    start = _stream(
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Edit", "input": {}},
        }
    )

    def piece(p: str) -> dict[str, Any]:
        return _stream(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
        )

    stop = _stream({"type": "content_block_stop", "index": 1})
    events = _decode(host(), [start, piece('{"file_path": "/a/'), piece('b.py"}'), stop])
    assert events == [ToolUse(id="toolu_1", name="Edit", input={"file_path": "/a/b.py"}, summary="Editing b.py")]
    # the complete assistant line after it adds nothing
    codec = host()
    events = _decode(
        codec,
        [
            start,
            piece("{}"),
            stop,
            _assistant([{"type": "tool_use", "id": "toolu_1", "name": "Edit", "input": {}}]),
        ],
    )
    assert [type(e) for e in events] == [ToolUse, RawEvent]
    # broken streamed JSON: diagnosed, the call still shows
    events = _decode(host(), [start, piece('{"file_pa'), stop])
    assert [type(e) for e in events] == [Diagnostic, ToolUse]
    assert isinstance(events[1], ToolUse) and events[1].input == {}


def test_bare_message_stop_is_not_a_terminal_in_stream_json() -> None:
    events = _decode(host(), [{"type": "message_delta", "usage": {"output_tokens": 3}}, {"type": "message_stop"}])
    assert events == []


def test_permission_denied_status() -> None:
    (ev,) = host().decode(
        {
            "type": "system",
            "subtype": "permission_denied",
            "tool_name": "Bash",
            "reason": "policy",
            "session_id": "s",
        }
    )
    assert ev == Status(
        kind="permission_denied",
        label="Permission denied: Bash",
        detail={"tool_name": "Bash", "reason": "policy"},
    )


def test_status_without_status_value() -> None:
    (ev,) = host().decode({"type": "system", "subtype": "status", "status": None})
    assert ev == Status(kind="status", label="", detail={"status": None})


# -- agent side ----------------------------------------------------------------------------------


def _script() -> list[Event]:
    return [
        SessionStarted(session_id="sess-1", model="claude-test", raw={"tools": ["Bash"]}),
        TextDelta(text="I will "),
        TextDelta(text="run it."),
        ToolUse(id="toolu_1", name="Bash", input={"command": "echo hi"}, summary="Running: echo hi"),
        ToolResult(tool_use_id="toolu_1", content="hi"),
        ThinkingDelta(text="so"),
        TextDelta(text="It said hi."),
        TurnCompleted(usage=Usage(input_tokens=5, output_tokens=6), result="It said hi."),
        TurnFailed(code="provider_timeout", message="no answer in 120 s"),
    ]


@pytest.mark.parametrize("partial", [False, True])
def test_agent_output_is_understood_by_the_claude_agent_sdk(partial: bool) -> None:
    parser = importlib.import_module("claude_agent_sdk._internal.message_parser")
    types = importlib.import_module("claude_agent_sdk.types")
    codec = StreamJsonDialect(partial_messages=partial).agent_codec()
    objs = [json.loads(json.dumps(o)) for ev in _script() for o in codec.encode(ev)]
    messages = [parser.parse_message(o) for o in objs]
    kinds = [type(m).__name__ for m in messages]
    if partial:
        assert "StreamEvent" in kinds
    plain = [m for m in messages if not isinstance(m, types.StreamEvent)]
    assert [type(m).__name__ for m in plain] == [
        "SystemMessage",
        "AssistantMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
        "AssistantMessage",
        "ResultMessage",
        "ResultMessage",
    ]
    assert plain[0].data["session_id"] == "sess-1" and plain[0].data["tools"] == ["Bash"]
    assert plain[1].content[0].text == "I will run it."
    assert plain[2].content[0].name == "Bash" and plain[2].content[0].input == {"command": "echo hi"}
    assert plain[6].is_error is False and plain[6].result == "It said hi." and plain[6].session_id == "sess-1"
    assert plain[6].usage == {"input_tokens": 5, "output_tokens": 6}
    assert plain[7].is_error is True and plain[7].result == "provider_timeout"


@pytest.mark.parametrize("partial", [False, True])
def test_agent_output_decodes_back(partial: bool) -> None:
    codec = StreamJsonDialect(partial_messages=partial).agent_codec()
    decoder = host()
    events = [ev for e in _script() for o in codec.encode(e) for ev in decoder.decode(orjson.loads(orjson.dumps(o)))]
    assert [e for e in events if not isinstance(e, RawEvent)] == [
        SessionStarted(session_id="sess-1", model="claude-test"),
        *([TextDelta(text="I will "), TextDelta(text="run it.")] if partial else [TextDelta(text="I will run it.")]),
        ToolUse(id="toolu_1", name="Bash", input={"command": "echo hi"}, summary="Running: echo hi"),
        ToolResult(tool_use_id="toolu_1", content="hi"),
        ThinkingDelta(text="so"),
        TextDelta(text="It said hi."),
        TurnCompleted(session_id="sess-1", usage=Usage(input_tokens=5, output_tokens=6), result="It said hi."),
        TurnFailed(code="provider_timeout", message="no answer in 120 s"),
    ]


def test_agent_decode_input_control_traffic() -> None:
    codec = StreamJsonDialect().agent_codec()
    assert (
        codec.decode_input(
            {
                "type": "control_request",
                "request_id": "init-1",
                "request": {"subtype": "initialize", "hooks": None},
            }
        )
        is None
    )
    assert (
        codec.decode_input(
            {
                "type": "control_request",
                "request_id": "x-2",
                "request": {"subtype": "set_model", "model": "m"},
            }
        )
        is None
    )
    assert codec.drain_output() == [
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": "init-1", "response": {}},
        },
        {
            "type": "control_response",
            "response": {
                "subtype": "error",
                "request_id": "x-2",
                "error": "unsupported control request: set_model",
            },
        },
    ]
    assert codec.drain_output() == []
    answer = {"subtype": "success", "request_id": "perm_1", "response": {"behavior": "allow"}}
    assert codec.decode_input({"type": "control_response", "response": answer}) is None
    assert codec.control_responses == {"perm_1": answer}
    assert codec.decode_input({"type": "control_cancel_request", "request_id": "perm_1"}) is None
    assert codec.decode_input({"type": "shutdown"}) == Shutdown()
    sdk_line = {
        "type": "user",
        "message": {"role": "user", "content": "hi"},
        "parent_tool_use_id": None,
        "session_id": "default",
    }
    assert codec.decode_input(sdk_line) == Turn.text("hi")
    bad = codec.decode_input({"type": "user", "message": {"role": "user", "content": 3}})
    assert isinstance(bad, InputError) and bad.code == "invalid_input_content"


def test_hot_path_text_delta_is_an_ordinary_event() -> None:
    import attrs

    from agentrt.events import to_json

    obj = _delta("fast", 4)
    (ev,) = host().decode(obj)
    assert type(ev) is TextDelta and ev == TextDelta(text="fast", index=4) and ev.raw is obj
    assert to_json(ev) == {"type": "text_delta", "text": "fast", "index": 4}
    assert hash(ev) == hash(TextDelta(text="fast", index=4))
    assert attrs.evolve(ev, text="x") == TextDelta(text="x", index=4)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ev.text = "mutated"  # type: ignore[misc]
