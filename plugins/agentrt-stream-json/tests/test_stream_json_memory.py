"""What the stream-json host keeps of a streamed message until its complete line arrives."""

from __future__ import annotations

import gc
import tracemalloc

import orjson

from agentrt import Plugins
from agentrt._line_parse import decode_objects
from agentrt.events import Diagnostic, Event, TextDelta
from agentrt.lowlevel import JsonlReader

PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "stream-json"})


def _delta(msg: str, text: str) -> bytes:
    return orjson.dumps({
        "type": "stream_event", "api_message_id": msg, "session_id": "s", "parent_tool_use_id": None,
        "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    })


def _assistant(msg: str, text: str) -> bytes:
    return orjson.dumps({
        "type": "assistant", "session_id": "s", "parent_tool_use_id": None,
        "message": {"id": msg, "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}]},
    })


def test_a_finished_message_is_kept_as_one_string_per_block_and_still_deduplicated() -> None:
    codec = PLUGINS.dialect("stream-json").host_codec()
    reader = JsonlReader()
    pieces = [f"p{i:05d}." for i in range(20_000)]  # 140 KB of text in 20,000 deltas

    def general(line: bytes) -> list[Event]:
        return decode_objects(codec, reader.parse(line))

    def feed(lines: list[bytes]) -> list[object]:
        events: list[object] = []
        for start in range(0, len(lines), 500):  # chunks of lines, as the pump hands them to decode_lines
            events.extend(codec.decode_lines(lines[start : start + 500], general))
        return events

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        streamed = feed([_delta("msg_a", p) for p in pieces])
        assert sum(1 for ev in streamed if type(ev) is TextDelta) == len(pieces)
        del streamed
        feed([_delta("msg_b", "next message")])  # message A is over; its complete line is still to come
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # One object per delta would be about 1.3 MB; the text itself is 140 KB.
    assert held < 400_000, held
    # The complete line of message A adds nothing: everything was streamed.
    events = feed([_assistant("msg_a", "".join(pieces))])
    assert not [ev for ev in events if isinstance(ev, (TextDelta, Diagnostic))]
    # And a complete line that goes further yields just the rest.
    feed([_delta("msg_c", "ab"), _delta("msg_c", "cd"), _delta("msg_d", "x")])
    [rest] = feed([_assistant("msg_c", "abcdef")])
    assert type(rest) is TextDelta and rest.text == "ef"
