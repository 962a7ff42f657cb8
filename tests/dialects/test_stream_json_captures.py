"""The stream-json host codec against every real Claude Code capture.

Each expected sequence was written by reading the capture by hand (see the
comments); none is generated from the decoder.  Text is joined per run of
consecutive deltas, so text decoded twice (the partial-messages trap) shows as
doubled text and fails.
"""

from __future__ import annotations

from typing import Any

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
)
from agentrt_stream_json.codec import StreamJsonDialect


def normalize(events: list[Event]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for ev in events:
        if isinstance(ev, TextDelta):
            if out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + ev.text)
            else:
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
        elif isinstance(ev, TurnCompleted):
            usage = ev.usage.to_dict() if ev.usage else None
            out.append(("completed", ev.session_id, usage, ev.result))
        elif isinstance(ev, TurnFailed):
            usage = ev.usage.to_dict() if ev.usage else None
            out.append(("failed", ev.code, ev.message, usage))
        elif isinstance(ev, ControlRequest):
            out.append(("control", ev.request_id, ev.subtype))
        elif isinstance(ev, RawEvent):
            out.append(("raw", ev.name))
        elif isinstance(ev, Diagnostic):
            out.append(("diagnostic", ev.code))
        else:  # pragma: no cover - a new event type needs a row here
            raise AssertionError(f"unexpected event {ev!r}")
    return out


def decode(objects: list[Any]) -> list[Event]:
    codec = StreamJsonDialect().host_codec()
    events: list[Event] = []
    for obj in objects:
        got = codec.decode(obj)
        for ev in got:
            assert ev.raw is obj  # every event keeps its source object
        events.extend(got)
    events.extend(codec.finish())
    return events


def usage(inp: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


BASIC_SID = "28ef0892-b6b1-4959-9e22-efd5c4026798"
REPLY1 = "Hello from the fake server (user message 1). You said: hello"
REPLY2 = "Hello from the fake server (user message 2). You said: second turn"


def test_basic_two_turns(capture: Any) -> None:
    # init, assistant, result; init again (same id), assistant, result.
    assert normalize(decode(capture("basic_two_turns"))) == [
        ("session", BASIC_SID, "claude-test"),
        ("text", REPLY1),
        ("completed", BASIC_SID, usage(2530, 12), REPLY1),
        ("session", BASIC_SID, "claude-test"),
        ("text", REPLY2),
        ("completed", BASIC_SID, usage(2572, 12), REPLY2),
    ]


def test_partial_messages_two_turns_text_is_not_counted_twice(capture: Any) -> None:
    sid = "0cdcc19c-fb81-4054-a541-c404f9f228b8"
    events = decode(capture("partial_messages_two_turns"))
    # 5 deltas in turn 1 and 6 in turn 2; the full assistant line adds nothing
    # (kept as a raw event), message_stop is not a terminal.
    assert [ev.text for ev in events if isinstance(ev, TextDelta)][:5] == [
        "Hello from t",
        "he fake serv",
        "er (user mes",
        "sage 1). You",
        " said: hello",
    ]
    assert normalize(events) == [
        ("session", sid, "claude-test"),
        ("status", "status", "requesting"),
        ("text", REPLY1),
        ("raw", "assistant"),
        ("completed", sid, usage(2531, 12), REPLY1),
        ("session", sid, "claude-test"),
        ("status", "status", "requesting"),
        ("text", REPLY2),
        ("raw", "assistant"),
        ("completed", sid, usage(2573, 12), REPLY2),
    ]


def test_resume(capture: Any) -> None:
    reply = "Hello from the fake server (user message 3). You said: third turn after resume"
    assert normalize(decode(capture("resume"))) == [
        ("session", BASIC_SID, "claude-test"),  # the resumed id is basic_two_turns'
        ("text", reply),
        ("completed", BASIC_SID, usage(2626, 12), reply),
    ]


BASH = ("Bash", {"command": "echo hi", "description": "Print hi"}, "Running: echo hi")


def test_tool_use_allowed(capture: Any) -> None:
    sid = "5d9caafd-9c85-4668-9394-aa455b402013"
    # assistant text and tool_use arrive as two lines of one message id.
    assert normalize(decode(capture("tool_use_allowed"))) == [
        ("session", sid, "claude-test"),
        ("text", "I will run a command."),
        ("tool_use", "toolu_fake000001", *BASH),
        ("tool_result", "toolu_fake000001", "hi", False),
        ("text", "The tool said: hi"),
        ("completed", sid, usage(5142, 24), "The tool said: hi"),
    ]


def test_tool_use_allowed_partial_one_tool_use_with_full_input(capture: Any) -> None:
    sid = "5c47fb94-d0d9-4e1f-a394-c33f03a70f72"
    events = decode(capture("tool_use_allowed_partial"))
    assert normalize(events) == [
        ("session", sid, "claude-test"),
        ("status", "status", "requesting"),
        ("text", "I will run a command."),
        ("raw", "assistant"),
        # content_block_start (empty input) + 5 input_json_delta pieces, then the
        # assistant line with the full input: one ToolUse, from the latter.
        ("tool_use", "toolu_fake000001", *BASH),
        ("tool_result", "toolu_fake000001", "hi", False),
        ("status", "status", "requesting"),
        ("text", "The tool said: hi"),
        ("raw", "assistant"),
        ("completed", sid, usage(5142, 24), "The tool said: hi"),
    ]


def test_http_500_fails_the_turn_despite_subtype_success(capture: Any) -> None:
    sid = "7bf602b2-60a8-465f-845a-e2002161a379"
    message = (
        "API Error: 500 Internal server error (fake). This is a server-side issue, usually temporary"
        " \u2014 try again in a moment. If it persists, check your inference gateway (127.0.0.1:45737)."
    )
    events = decode(capture("http_500"))
    assert normalize(events) == [
        ("session", sid, "claude-test"),
        ("status", "status", "requesting"),
        ("status", "api_retry", "API error 500, retrying (attempt 1 of 2)"),
        ("status", "api_retry", "API error 500, retrying (attempt 2 of 2)"),
        # the synthetic assistant message is an error report, not reply text
        ("status", "api_error", "server_error"),
        ("failed", "api_error_500", message, usage(0, 0)),
    ]
    retries = [ev for ev in events if isinstance(ev, Status) and ev.kind == "api_retry"]
    assert [(r.detail["attempt"], r.detail["retry_delay_ms"], r.detail["error_status"]) for r in retries] == [
        (1, 584, 500),
        (2, 1228, 500),
    ]
    api_error = next(ev for ev in events if isinstance(ev, Status) and ev.kind == "api_error")
    assert api_error.detail["api_error_status"] == 500
    assert api_error.detail["text"] == message


def test_every_capture_decodes_without_diagnostics(all_capture_objects: list[Any]) -> None:
    events = decode(all_capture_objects)
    assert events and not [ev for ev in events if isinstance(ev, Diagnostic)]
