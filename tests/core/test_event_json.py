"""The planned JSON form of events equals the generic cattrs unstructuring it replaced.

``to_json`` and the ``--json`` line encoder are compared with the old encoder
(kept here as the reference) on every event class, with plain values,
containers, tuples, usage, odd mappings and nested attrs values, and on every
event the stream-json codec decodes from the Claude Code captures.
"""

from __future__ import annotations

import types
from typing import Any

import attrs
import cattrs
import orjson
import pytest

from agentrt._eventjson import event_line
from agentrt._plugins import Plugins
from agentrt.events import (
    EVENT_TYPES,
    ControlRequest,
    Diagnostic,
    Event,
    Lifecycle,
    ProcessExited,
    RawEvent,
    SessionStarted,
    StateChanged,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
    from_json,
    to_json,
)

from ..plugin_data import CLAUDE_CODE_CAPTURES

CAPTURES = CLAUDE_CODE_CAPTURES
_OLD = cattrs.Converter(omit_if_default=False)


def old_to_json(event: Event) -> dict[str, Any]:
    """The encoder to_json used before: cattrs unstructuring of the whole event."""
    data: dict[str, Any] = {"type": event.type}
    data.update(_OLD.unstructure(event))
    del data["_raw"]
    return data


@attrs.frozen
class _Point:
    x: int
    y: tuple[int, ...] = ()


NESTED = {"a": [1, 2.5, None, True, {"b": "c\u00e9"}], "t": (1, "x"), "p": _Point(1, (2, 3)),
          "u": Usage(input_tokens=3)}

SAMPLES: list[Event] = [
    SessionStarted(session_id="s-1", model=None, raw={"x": 1}),
    SessionStarted(session_id="s-1", model="m"),
    TurnStarted(turn=2, prompt="hi \"there\"\n"),
    TextDelta(text="a\u00e9\n", index=3),
    TextDelta(text=""),
    ThinkingDelta(text="t", index=1),
    ToolUse(id="t1", name="Bash", input={"command": "ls", "n": [1, {"k": None}]}, summary="ls"),
    ToolUse(id="t2", name="X", input=types.MappingProxyType({"ro": 1})),
    ToolResult(tool_use_id="t1", content=[{"type": "text", "text": "out"}], is_error=True),
    ToolResult(tool_use_id="t1", content="plain"),
    ToolResult(tool_use_id="t1", content=NESTED),
    ToolResult(tool_use_id="t1", content=("a", ["b"])),
    ToolResult(tool_use_id="t1"),
    Status(kind="retry", label="retrying", detail={"attempt": 1, "max": 2.0}),
    ControlRequest(request_id="r1", subtype="can_use_tool", request={"tool_name": "Bash", "input": {}}),
    TurnCompleted(session_id="s", usage=Usage(input_tokens=1, output_tokens=2), result="ok"),
    TurnCompleted(),
    TurnFailed(code="api_error_500", message="boom", usage=Usage()),
    Diagnostic(code="odd_line", detail="d"),
    ProcessExited(returncode=None, signal=9, requested=True),
    ProcessExited(returncode=0),
    RawEvent(name="system/hook", raw={"k": "v"}),
    Lifecycle(kind="started", message="m", pid=12, timestamp="2026-01-01T00:00:00Z", data={"d": [1]}, agent_id="a"),
    StateChanged(state="running", previous="starting", reason="ok"),
]


def test_the_samples_cover_every_event_class() -> None:
    assert {type(ev) for ev in SAMPLES} == set(EVENT_TYPES.values())


@pytest.mark.parametrize("event", SAMPLES, ids=lambda ev: type(ev).__name__)
def test_to_json_equals_the_cattrs_form(event: Event) -> None:
    new, old = to_json(event), old_to_json(event)
    assert new == old
    assert list(new) == list(old)  # the same key order, so the same bytes
    assert orjson.dumps(new) == orjson.dumps(old)
    assert event_line(event) == orjson.dumps(old) + b"\n"


@pytest.mark.parametrize("event", SAMPLES, ids=lambda ev: type(ev).__name__)
def test_to_json_still_copies_containers(event: Event) -> None:
    data = to_json(event)
    for name, value in data.items():
        if isinstance(value, (dict, list)) and value:
            assert value is not getattr(event, name), name


def test_to_json_with_raw_and_back() -> None:
    ev = RawEvent(name="x", raw={"k": [1]})
    data = to_json(ev, raw=True)
    assert data == {"type": "raw", "name": "x", "raw": {"k": [1]}}
    assert from_json(data) == ev and from_json(data).raw == {"k": [1]}


def test_a_subclass_gets_its_own_plan() -> None:
    @attrs.frozen(kw_only=True)
    class Custom(TextDelta):
        type = "custom"
        extra: dict[str, int] = attrs.field(factory=dict)

    ev = Custom(text="x", extra={"a": 1})
    assert to_json(ev) == old_to_json(ev) == {"type": "custom", "text": "x", "index": 0, "extra": {"a": 1}}
    assert event_line(ev) == orjson.dumps(old_to_json(ev)) + b"\n"
    assert to_json(TextDelta(text="y")) == {"type": "text_delta", "text": "y", "index": 0}


def test_what_orjson_refuses_is_refused_alike() -> None:
    ev = ToolResult(tool_use_id="t", content={"s": {1, 2}})
    with pytest.raises(TypeError):
        orjson.dumps(old_to_json(ev))
    with pytest.raises(TypeError):
        event_line(ev)


def _capture_events() -> list[Event]:
    codec = Plugins(autoload=True).dialect("stream-json").host_codec()
    events: list[Event] = []
    for path in sorted(CAPTURES.glob("*.stdout.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                events.extend(codec.decode(orjson.loads(line)))
    return events


def test_every_event_of_the_claude_code_captures_encodes_as_before() -> None:
    events = _capture_events()
    kinds = {type(ev) for ev in events}
    assert {TextDelta, ToolUse, ToolResult, TurnCompleted, SessionStarted} <= kinds
    for ev in events:
        old = old_to_json(ev)
        assert to_json(ev) == old
        assert event_line(ev) == orjson.dumps(old) + b"\n"


def test_run_json_prints_every_sample_and_capture_event_as_to_json() -> None:
    import os

    import trio

    from agentrt._cli_run import _StdoutSink
    from agentrt.events import EventBatch

    deltas = [TextDelta(text="\u2028\x00\"\\\U0001f600", index=7), TextDelta(text="x", index=True)]
    events = tuple(SAMPLES + deltas + _capture_events())
    r, w = os.pipe()
    chunks: list[bytes] = []

    async def main() -> None:
        sink = _StdoutSink(True, fd=w)
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                while chunk := await trio.to_thread.run_sync(os.read, r, 1 << 16):
                    chunks.append(chunk)

            nursery.start_soon(read)
            with trio.fail_after(30):
                await sink.handle(EventBatch(source="c", first_seq=0, mono=0.0, wall=0.0, events=events))
            os.close(w)

    try:
        trio.run(main)
    finally:
        os.close(r)
    assert b"".join(chunks) == b"".join(orjson.dumps(old_to_json(ev)) + b"\n" for ev in events)
