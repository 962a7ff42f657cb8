"""The stream-json host codec against every real Claude Code capture.

Each expected sequence was written by reading the capture by hand (see the
comments); none is generated from the decoder.  The captures are recorded by
``captures/claude-code/record.py``, which fixes session ids, replies, ids
and usage; what varies per recording (retry delays, the fake API's port) is
checked against the capture's own line.  Text is joined per run of
consecutive deltas, so text decoded twice (the partial-messages trap) shows as
doubled text and fails.
"""

from __future__ import annotations

import re
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


BASIC_SID = "d1efd9e4-e2ea-5ec5-888a-c55c1f181ffe"  # --session-id, fixed by record.py
REPLY1 = "Hello from the fake server (user message 1). You said: hello"
REPLY2 = "Hello from the fake server (user message 2). You said: second turn"


def test_basic_two_turns(capture: Any) -> None:
    # init, assistant, result; init again (same id), assistant, result.
    assert normalize(decode(capture("basic_two_turns"))) == [
        ("session", BASIC_SID, "claude-test"),
        ("text", REPLY1),
        ("completed", BASIC_SID, usage(10, 5), REPLY1),
        ("session", BASIC_SID, "claude-test"),
        ("text", REPLY2),
        ("completed", BASIC_SID, usage(10, 5), REPLY2),
    ]


def test_partial_messages_two_turns_text_is_not_counted_twice(capture: Any) -> None:
    sid = "9242e101-a460-5be7-a781-d0525c5a3b7c"
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
        ("completed", sid, usage(10, 5), REPLY1),
        ("session", sid, "claude-test"),
        ("status", "status", "requesting"),
        ("text", REPLY2),
        ("raw", "assistant"),
        ("completed", sid, usage(10, 5), REPLY2),
    ]


def test_resume(capture: Any) -> None:
    reply = "Hello from the fake server (user message 3). You said: third turn after resume"
    assert normalize(decode(capture("resume"))) == [
        ("session", BASIC_SID, "claude-test"),  # the resumed id is basic_two_turns'
        ("text", reply),
        ("completed", BASIC_SID, usage(10, 5), reply),
    ]


BASH = ("Bash", {"command": "echo hi", "description": "Run the command"}, "Running: echo hi")


def test_tool_use_allowed(capture: Any) -> None:
    sid = "833ac688-ca67-5dc3-9659-ecbd27ba6e3a"
    # assistant text and tool_use arrive as two lines of one message id.
    assert normalize(decode(capture("tool_use_allowed"))) == [
        ("session", sid, "claude-test"),
        ("text", "I will run a command."),
        ("tool_use", "toolu_fake_1", *BASH),
        ("tool_result", "toolu_fake_1", "hi", False),
        ("text", "The tool said: hi"),
        ("completed", sid, usage(20, 10), "The tool said: hi"),
    ]


def test_tool_use_allowed_partial_one_tool_use_with_full_input(capture: Any) -> None:
    sid = "f7d5f7a7-e2f1-5e8e-a80c-5c5d05b2f503"
    events = decode(capture("tool_use_allowed_partial"))
    assert normalize(events) == [
        ("session", sid, "claude-test"),
        ("status", "status", "requesting"),
        ("text", "I will run a command."),
        ("raw", "assistant"),
        # content_block_start (empty input) + 6 input_json_delta pieces, then the
        # assistant line with the full input: one ToolUse, from the latter.
        ("tool_use", "toolu_fake_1", *BASH),
        ("tool_result", "toolu_fake_1", "hi", False),
        ("status", "status", "requesting"),
        ("text", "The tool said: hi"),
        ("raw", "assistant"),
        ("completed", sid, usage(20, 10), "The tool said: hi"),
    ]


def test_http_500_fails_the_turn_despite_subtype_success(capture: Any) -> None:
    sid = "1e4f9687-5460-58bd-b02a-5541f3b6905e"
    objects = capture("http_500")
    events = decode(objects)
    # the CLI names the fake API's address, whose port differs per recording
    message = next(ev.message for ev in events if isinstance(ev, TurnFailed))
    assert re.fullmatch(
        r"API Error: 500 Internal server error \(fake\)\. This is a server-side issue, usually temporary"
        r" \u2014 try again in a moment\. If it persists, check your inference gateway \(127\.0\.0\.1:\d+\)\.",
        message,
    )
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
    assert [(r.detail["attempt"], r.detail["error_status"]) for r in retries] == [(1, 500), (2, 500)]
    # the delays carry a random jitter: each is the one its line gave
    lines = [o for o in objects if o.get("subtype") == "api_retry"]
    assert [r.detail["retry_delay_ms"] for r in retries] == [o["retry_delay_ms"] for o in lines]
    assert all(isinstance(o["retry_delay_ms"], int) and o["retry_delay_ms"] > 0 for o in lines)
    api_error = next(ev for ev in events if isinstance(ev, Status) and ev.kind == "api_error")
    assert api_error.detail["api_error_status"] == 500
    assert api_error.detail["text"] == message


def test_every_capture_decodes_without_diagnostics(all_capture_objects: list[Any]) -> None:
    events = decode(all_capture_objects)
    assert events and not [ev for ev in events if isinstance(ev, Diagnostic)]
