"""Property tests: agent encode → JSON → host decode gives the events back; host encode_turn →
agent decode_input gives the turn back.  Both dialects, both stream-json agent modes."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt.dialect import Dialect, DocumentBlock, ImageBlock, TextBlock, Turn
from agentrt.events import (
    Event,
    RawEvent,
    SessionStarted,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.labels import tool_label
from agentrt.testing import normalize_events
from agentrt_awp_jsonl.codec import AwpJsonlDialect
from agentrt_stream_json.codec import StreamJsonDialect

SETTINGS = settings(max_examples=80, deadline=None)
FUZZ_SETTINGS = settings(max_examples=50, deadline=None)

ids = st.from_regex(r"[A-Za-z0-9._:-]{1,40}", fullmatch=True)
codes = st.from_regex(r"[a-z0-9_:-]{1,40}", fullmatch=True)
texts = st.text(min_size=1, max_size=24)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
counts = st.none() | st.integers(0, 2**31)
usages = st.none() | st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_input_tokens=counts,
    cache_creation_input_tokens=counts,
)


@st.composite
def tool_uses(draw: Any) -> ToolUse:
    name = draw(st.sampled_from(["Bash", "Read", "Write", "mcp__srv__Edit", "Grep", "custom_tool"]))
    tool_input = draw(st.dictionaries(st.sampled_from(["command", "file_path", "path", "x"]), json_values, max_size=3))
    return ToolUse(id=draw(ids), name=name, input=tool_input, summary=tool_label(name, tool_input))


body_events = st.one_of(
    st.builds(TextDelta, text=texts, index=st.integers(0, 2)),
    st.builds(ThinkingDelta, text=texts, index=st.integers(0, 2)),
    tool_uses(),
    st.builds(ToolResult, tool_use_id=ids, content=json_values, is_error=st.booleans()),
)


@st.composite
def scripts(draw: Any) -> list[Event]:
    sid = draw(ids)
    events: list[Event] = [SessionStarted(session_id=sid, model=draw(st.none() | texts))]
    for _ in range(draw(st.integers(1, 3))):
        for ev in draw(st.lists(body_events, max_size=8)):
            # Tool-call ids are unique within a session (stream-json relies on it).
            events.append(attrs.evolve(ev, id=f"{ev.id}-{len(events)}") if isinstance(ev, ToolUse) else ev)
        if draw(st.booleans()):
            events.append(TurnCompleted(session_id=sid, usage=draw(usages), result=draw(st.none() | st.text())))
        else:
            events.append(TurnFailed(code=draw(codes), message=draw(st.text(max_size=30)), usage=draw(usages)))
    return events


def through_the_wire(dialect: Dialect, script: list[Event]) -> list[Event]:
    agent, host = dialect.agent_codec(), dialect.host_codec()
    out: list[Event] = []
    for event in script:
        for obj in agent.encode(event):
            out.extend(host.decode(orjson.loads(orjson.dumps(obj))))
    return [ev for ev in out if not isinstance(ev, RawEvent)]


EXACT = {
    "awp-jsonl": AwpJsonlDialect,
    "stream-json partial": lambda: StreamJsonDialect(partial_messages=True),
}


@pytest.mark.parametrize("which", sorted(EXACT))
@SETTINGS
@given(script=scripts())
def test_events_round_trip_exactly(which: str, script: list[Event]) -> None:
    assert through_the_wire(EXACT[which](), script) == script


@SETTINGS
@given(script=scripts())
def test_stream_json_messages_round_trip_with_text_merged_per_block(script: list[Event]) -> None:
    # Without partial messages a block is one assistant line: its deltas arrive joined.
    got = through_the_wire(StreamJsonDialect(), script)
    assert normalize_events(got) == normalize_events(script)
    assert all(not isinstance(ev, (TextDelta, ThinkingDelta)) or ev.text for ev in got)


base64ish = st.from_regex(r"[A-Za-z0-9+/]{0,40}={0,2}", fullmatch=True)
blocks = st.one_of(
    st.builds(TextBlock, text=st.text(max_size=40)),
    st.builds(ImageBlock, media_type=st.sampled_from(["image/png", "image/jpeg", "image/webp"]), data=base64ish),
    st.builds(DocumentBlock, media_type=st.just("application/pdf"), data=base64ish),
)


@pytest.mark.parametrize("dialect", [AwpJsonlDialect(), StreamJsonDialect()], ids=lambda d: d.name)
@SETTINGS
@given(content=st.lists(blocks, min_size=1, max_size=5))
def test_turn_round_trips(dialect: Dialect, content: list[Any]) -> None:
    turn = Turn(content=tuple(content))
    line = dialect.host_codec().encode_turn(turn)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert dialect.agent_codec().decode_input(orjson.loads(line)) == turn


protocolish = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "system",
                "assistant",
                "user",
                "result",
                "stream_event",
                "rate_limit_event",
                "control_request",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        )
    },
    optional={
        k: json_values
        for k in (
            "subtype",
            "message",
            "event",
            "delta",
            "index",
            "content_block",
            "usage",
            "session_id",
            "is_error",
            "result",
            "request",
            "request_id",
            "rate_limit_info",
            "api_message_id",
            "error",
            "api_error_status",
        )
    },
)


@pytest.mark.parametrize("dialect", [AwpJsonlDialect(), StreamJsonDialect()], ids=lambda d: d.name)
@FUZZ_SETTINGS
@given(values=st.lists(protocolish | json_values, max_size=8))
def test_decode_never_raises(dialect: Dialect, values: list[Any]) -> None:
    codec = dialect.host_codec()
    for value in values:
        events = codec.decode(value)
        assert isinstance(events, (list, tuple)) and all(isinstance(ev, Event) for ev in events)
        for ev in events:
            assert ev.raw is value
    agent = dialect.agent_codec()
    for value in values:
        agent.decode_input(value)
