"""The awp-jsonl dialect: host codec (AWP host translation) and agent codec (reference CLI)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest

import agentrt_awp_jsonl
from agentrt import AgentrtError, Plugins
from agentrt.dialect import DocumentBlock, ImageBlock, InputError, Shutdown, TextBlock, Turn
from agentrt.events import (
    Diagnostic,
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
from agentrt_awp_jsonl.codec import AwpJsonlDialect


def host() -> Any:
    return AwpJsonlDialect().host_codec()


# -- registration --------------------------------------------------------------


def test_registers_awp_jsonl_and_passthrough_alias() -> None:
    plugins = Plugins()
    plugins.register(agentrt_awp_jsonl, name="awp-jsonl")
    assert {"awp-jsonl", "passthrough"} <= set(plugins.dialects())
    awp, alias = plugins.dialect("awp-jsonl"), plugins.dialect("passthrough")
    assert (awp.name, alias.name) == ("awp-jsonl", "passthrough")
    assert awp.compat_args == alias.compat_args == ()
    turn = Turn.text("same")
    assert awp.host_codec().encode_turn(turn) == alias.host_codec().encode_turn(turn)


@pytest.mark.parametrize(
    ("package", "module"),
    [("agentrt_awp_jsonl", "agentrt_awp_jsonl.codec"), ("agentrt_stream_json", "agentrt_stream_json.codec")],
)
def test_plugin_init_is_thin(package: str, module: str) -> None:
    # Registering must not import the codec: the factory does, on first use.
    code = (
        "import sys, importlib; from agentrt import Plugins; p = Plugins(); "
        f"p.register(importlib.import_module({package!r})); names = sorted(p.dialects()); "
        f"print({module!r} in sys.modules, names)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.startswith("False ")


# -- host: input --------------------------------------------------------------------


def test_encode_turn_is_the_contract_line() -> None:
    turn = Turn(
        content=(
            ImageBlock(media_type="image/png", data="aW1n"),
            DocumentBlock(media_type="application/pdf", data="cGRm"),
            TextBlock(text="Explain this failure"),
        )
    )
    line = host().encode_turn(turn)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "cGRm"},
                },
                {"type": "text", "text": "Explain this failure"},
            ],
        },
    }
    assert host().encode_turn(Turn.text("hi")) == (
        b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}\n'
    )


def test_unsupported_block_raises_before_any_bytes() -> None:
    class Audio:
        pass

    with pytest.raises(AgentrtError) as err:
        host().encode_turn(Turn(content=(TextBlock(text="ok"), Audio())))  # type: ignore[arg-type]
    assert err.value.code == "unsupported_content_block"
    with pytest.raises(AgentrtError) as err:
        host().encode_turn(Turn.text("lone \ud800 surrogate"))
    assert err.value.code == "unsupported_content_block"
    assert "\ud800" not in str(err.value)


def test_shutdown_line() -> None:
    assert host().encode_shutdown() == b'{"type":"shutdown"}\n'


# -- host: output ---------------------------------------------------------------------


def test_reference_cli_tape() -> None:
    # What the reference agent CLI prints for a tool round then a text round (§B).
    tape: list[dict[str, Any]] = [
        {
            "type": "system",
            "subtype": "init",
            "session_id": "sess-1",
            "model": "m-1",
            "cwd": "/w",
            "tools": ["awp_run_managed_task"],
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call-0",
                        "name": "awp_run_managed_task",
                        "input": {"argv": ["echo", "ok"], "timeout_seconds": 60},
                    }
                ],
            },
            "session_id": "sess-1",
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "verified: "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "session_id": "sess-1",
            "result": "verified: ok",
            "usage": {"input_tokens": 28, "output_tokens": 9},
        },
    ]
    codec = host()
    events = [ev for obj in tape for ev in codec.decode(obj)]
    assert events == [
        SessionStarted(session_id="sess-1", model="m-1"),
        ToolUse(
            id="call-0",
            name="awp_run_managed_task",
            input={"argv": ["echo", "ok"], "timeout_seconds": 60},
            summary="Working",
        ),
        TextDelta(text="verified: "),
        TextDelta(text="ok"),
        TurnCompleted(session_id="sess-1", usage=Usage(input_tokens=28, output_tokens=9), result="verified: ok"),
    ]
    assert events[0].raw is tape[0] and events[-1].raw is tape[-1]


def test_raw_stream_finishing_with_message_stop() -> None:
    codec = host()
    codec.decode({"type": "system", "subtype": "init", "session_id": "s-2"})
    tape: list[Any] = [
        {"type": "message_start", "message": {"model": "m"}},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "mcp__srv__Bash", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
    events = [ev for obj in tape for ev in codec.decode(obj)]
    assert events == [
        RawEvent(name="message_start"),
        # rendered from the start: empty input, label from the (MCP-stripped) name
        ToolUse(id="t1", name="mcp__srv__Bash", input={}, summary="Running command"),
        ThinkingDelta(text="hm", index=2),
        TextDelta(text="x", index=3),
        TurnCompleted(session_id="s-2", usage=Usage(output_tokens=7)),
    ]
    # the remembered usage belongs to that turn only
    assert list(codec.decode({"type": "message_stop"})) == [TurnCompleted(session_id="s-2")]


@pytest.mark.parametrize(
    ("obj", "code", "message"),
    [
        (
            {
                "type": "result",
                "subtype": "error",
                "is_error": True,
                "result": "stable_machine_readable_error",
            },
            "stable_machine_readable_error",
            "stable_machine_readable_error",
        ),
        (
            {"type": "result", "subtype": "startup_error", "is_error": True, "result": "model_required"},
            "model_required",
            "model_required",
        ),
        (
            {"type": "result", "subtype": "error_max_turns", "is_error": True, "result": "Too many turns!"},
            "cc_error_max_turns",
            "Too many turns!",
        ),
        (
            {"type": "result", "is_error": True, "result": "Bad thing happened."},
            "cc_error",
            "Bad thing happened.",
        ),
        ({"type": "result", "subtype": "bad subtype!", "is_error": True}, "cc_error", ""),
        (
            {
                "type": "result",
                "subtype": "error",
                "is_error": True,
                "result": "provider_timeout",
                "errors": ["the provider did not answer"],
            },
            "provider_timeout",
            "the provider did not answer",
        ),
    ],
)
def test_failed_result_codes(obj: dict[str, Any], code: str, message: str) -> None:
    (event,) = host().decode(obj)
    assert isinstance(event, TurnFailed)
    assert (event.code, event.message) == (code, message)


def test_result_success_usage_keeps_only_integers() -> None:
    (event,) = host().decode(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "session_id": "s",
            "usage": {"input_tokens": 12, "output_tokens": "8", "cache_read_input_tokens": 3},
        }
    )
    assert event == TurnCompleted(session_id="s", usage=Usage(input_tokens=12, cache_read_input_tokens=3))


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (
            {"status": "rejected", "resetsAt": 1},
            Status(kind="rate_limit", label="rate_limited", detail={"status": "rejected", "resetsAt": 1}),
        ),
        (
            {"status": "allowed_warning"},
            Status(kind="rate_limit", label="rate_limited", detail={"status": "allowed_warning"}),
        ),
        ({"status": "allowed"}, RawEvent(name="rate_limit_event")),
        ({"status": ""}, RawEvent(name="rate_limit_event")),
        (None, RawEvent(name="rate_limit_event")),
    ],
)
def test_rate_limit_event(info: Any, expected: Any) -> None:
    assert list(host().decode({"type": "rate_limit_event", "rate_limit_info": info})) == [expected]


def test_unknown_and_odd_objects_are_kept() -> None:
    codec = host()
    obj = {"type": "telemetry", "x": 1}
    (ev,) = codec.decode(obj)
    assert ev == RawEvent(name="telemetry") and ev.raw is obj
    assert list(codec.decode({"type": "system", "subtype": "status"})) == [RawEvent(name="system/status")]
    assert list(codec.decode({"type": "user", "message": {"content": "x"}})) == [RawEvent(name="user")]
    for odd in ([1, 2], "text", 3, None):
        (diag,) = codec.decode(odd)
        assert isinstance(diag, Diagnostic) and diag.code == "unexpected_output_shape" and diag.raw == odd
    (diag,) = codec.decode({"no": "type"})
    assert isinstance(diag, Diagnostic) and diag.code == "unexpected_output_shape"
    (diag,) = codec.decode({"type": "system", "subtype": "init", "session_id": 7})
    assert isinstance(diag, Diagnostic)


def test_session_id_shape_is_left_to_the_conversation() -> None:
    (ev,) = host().decode({"type": "system", "subtype": "init", "session_id": "has spaces / slashes"})
    assert ev == SessionStarted(session_id="has spaces / slashes")


def test_assistant_blocks() -> None:
    (text, tool, thinking, other) = host().decode(
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "tool_use", "id": "t", "name": "Write", "input": {"file_path": "/x/y/notes.md"}},
                    {"type": "thinking", "thinking": "why"},
                    {"type": "image", "source": {}},
                ]
            },
        }
    )
    assert text == TextDelta(text="a", index=0)
    assert tool == ToolUse(id="t", name="Write", input={"file_path": "/x/y/notes.md"}, summary="Writing notes.md")
    assert thinking == ThinkingDelta(text="why", index=2)
    assert other == RawEvent(name="assistant/image")
    assert list(host().decode({"type": "assistant", "message": {"content": [{"type": "text", "text": ""}]}})) == [
        RawEvent(name="assistant")
    ]


def test_user_tool_result() -> None:
    (ev,) = host().decode(
        {
            "type": "user",
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": "out"}],
                        "is_error": True,
                    }
                ]
            },
        }
    )
    assert ev == ToolResult(tool_use_id="t", content=[{"type": "text", "text": "out"}], is_error=True)


# -- agent side -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"type": "shutdown"}, Shutdown()),
        ({"type": "user", "message": {"role": "user", "content": "plain string"}}, Turn.text("plain string")),
        (
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "video"},
                        {"type": "text", "text": "b"},
                    ],
                },
            },
            Turn(content=(TextBlock(text="a"), TextBlock(text="b"))),
        ),
        (
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/gif", "data": "R0"},
                        }
                    ],
                },
            },
            Turn(content=(ImageBlock(media_type="image/gif", data="R0"),)),
        ),
        (
            {"type": "user", "message": {"role": "user", "content": [{"type": "video"}]}},
            InputError(code="empty_input_content"),
        ),
        (
            {"type": "user", "message": {"role": "user", "content": []}},
            InputError(code="empty_input_content"),
        ),
        (
            {"type": "user", "message": {"role": "user", "content": {"text": "x"}}},
            InputError(code="invalid_input_content"),
        ),
        ({"type": "user", "message": {"content": "no role"}}, InputError(code="invalid_input_message")),
        (
            {"type": "assistant", "message": {"role": "user", "content": "x"}},
            InputError(code="invalid_input_message"),
        ),
        ([1], InputError(code="invalid_input_message")),
        ("user", InputError(code="invalid_input_message")),
    ],
)
def test_decode_input(obj: Any, expected: Any) -> None:
    got = AwpJsonlDialect().agent_codec().decode_input(obj)
    if isinstance(expected, InputError):
        assert isinstance(got, InputError) and got.code == expected.code and got.detail
    else:
        assert got == expected


def test_agent_encode_frames_blocks_like_the_reference_cli() -> None:
    codec = AwpJsonlDialect().agent_codec()
    events = [
        SessionStarted(session_id="s", model="m", raw={"tools": ["awp_run_managed_task"], "cwd": "/w"}),
        TextDelta(text="a"),
        TextDelta(text="b"),
        ToolUse(id="t", name="Bash", input={"command": "ls"}),
        TextDelta(text="c", index=0),
        TextDelta(text="d", index=1),
        TurnCompleted(usage=Usage(input_tokens=1, output_tokens=2), result="abcd"),
        TurnFailed(code="provider_timeout", message="no answer"),
    ]
    out = [obj for ev in events for obj in codec.encode(ev)]
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

    def delta(i: int, t: str) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}

    assert out == [
        {
            "type": "system",
            "subtype": "init",
            "session_id": "s",
            "model": "m",
            "cwd": "/w",
            "tools": ["awp_run_managed_task"],
        },
        start,
        delta(0, "a"),
        delta(0, "b"),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}}],
            },
            "session_id": "s",
        },
        start,
        delta(0, "c"),
        {"type": "content_block_stop", "index": 0},
        {**start, "index": 1},
        delta(1, "d"),
        {"type": "content_block_stop", "index": 1},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "session_id": "s",
            "result": "abcd",
            "usage": {"input_tokens": 1, "output_tokens": 2},
        },
        {
            "type": "result",
            "subtype": "error",
            "is_error": True,
            "session_id": "s",
            "result": "provider_timeout",
            "errors": ["no answer"],
        },
    ]
