"""decode_lines (the chunk-at-a-time host path) gives exactly the events of the plain parse and decode.

The lines path is what the pump takes for awp-jsonl and stream-json: the
framing hands a chunk's complete lines, unparsed, to the codec, which parses
and decodes the lines it knows in one loop and gives the others to
``general`` (the framing's rules, then ``decode``).  It is held to the plain
path (orjson, ``decode`` per object) on the same property-test lines, edge
lines and real captures, cut into chunks anywhere.
"""

from __future__ import annotations

import itertools
import json
import pickle
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt._line_parse import decode_objects
from agentrt.dialect import HostCodec, make_text_delta, text_delta_slots
from agentrt.events import TextDelta, to_json
from agentrt.lowlevel import JsonlReader, Malformed, OutputOversize

from .test_decode_batch import _EDGE_LINES, _LINES, CAPTURE_DIR, CAPTURES, PLUGINS, _corpus_module, _read_all


def _read_lines(codec: HostCodec, data: bytes, cuts: list[int]) -> tuple[list[Any], int]:
    # As the pump does on the lines path; a malformed line's diagnostic is left out,
    # as _read_all leaves out its marker (the count is compared instead).
    reader = JsonlReader()
    events: list[Any] = []

    def general(line: bytes) -> list[Any]:
        return decode_objects(codec, [obj for obj in reader.parse(line) if type(obj) is not Malformed])

    bounds = [0, *sorted(set(cuts)), len(data)]
    for lo, hi in itertools.pairwise(bounds):
        lines = reader.feed_lines(data[lo:hi])
        if lines:
            events.extend(codec.decode_lines(lines, general))
    for obj in reader.finish():
        if type(obj) is not Malformed:
            events.extend(codec.decode(obj))
    return events, reader.malformed_count


def _same(fast: list[Any], plain: list[Any]) -> None:
    assert [repr(ev) for ev in fast] == [repr(ev) for ev in plain]
    assert fast == plain
    assert [ev.raw for ev in fast] == [ev.raw for ev in plain]


@pytest.mark.parametrize("dialect", ["stream-json", "awp-jsonl"])
def test_both_anthropic_dialects_take_text_deltas_themselves(dialect: str) -> None:
    # Their decode_lines parses a text-delta line itself: general never sees it.
    def never(line: bytes) -> list[Any]:
        raise AssertionError(f"the general path took {line!r}")

    inner = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}'
    line = inner if dialect == "awp-jsonl" else b'{"type":"stream_event","event":' + inner + b"}"
    (event,) = PLUGINS.dialect(dialect).host_codec().decode_lines([line], never)
    assert type(event) is TextDelta and event.text == "hi" and event.raw == orjson.loads(line)


@pytest.mark.parametrize("dialect", ["stream-json", "awp-jsonl"])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_decode_lines_gives_the_events_of_the_generic_parse(dialect: str, data: st.DataObject) -> None:
    lines = data.draw(_LINES[dialect])
    blob = b"\n".join(lines) + b"\n"
    cuts = data.draw(st.lists(st.integers(0, len(blob)), max_size=4))
    fast, fast_bad = _read_lines(PLUGINS.dialect(dialect).host_codec(), blob, cuts)
    plain, plain_bad = _read_all(PLUGINS.dialect(dialect).host_codec(), blob, cuts)
    assert fast_bad == plain_bad
    _same(fast, plain)
    # Whatever the agent wrote, every event (and its raw object) can be encoded, as every sink does.
    for ev in fast:
        orjson.dumps(to_json(ev))
        orjson.dumps(ev.raw)


@pytest.mark.parametrize("line", _EDGE_LINES)
def test_decode_lines_edges_of_the_typed_line_kinds(line: bytes) -> None:
    # Values msgspec would read otherwise than the framing (past 64 bits, nested, refused) send
    # the line to the general path, so the events are those of the plain parse.
    fast, _ = _read_lines(PLUGINS.dialect("stream-json").host_codec(), line + b"\n", [])
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), line + b"\n", [])
    assert fast
    _same(fast, plain)


@pytest.mark.parametrize("dialect", ["stream-json", "awp-jsonl"])
@pytest.mark.parametrize("source", [p.name for p in CAPTURES] + ["bench-corpus"])
def test_decode_lines_on_real_output(dialect: str, source: str) -> None:
    if source == "bench-corpus":
        blob = b"".join(line for _, line in _corpus_module().corpus_lines(3000, big_lines=False))
    else:
        blob = (CAPTURE_DIR / source).read_bytes()
    if dialect == "awp-jsonl":  # the bare raw events, as an awp-jsonl agent writes them
        blob = b"".join(
            orjson.dumps(obj["event"]) + b"\n" if obj.get("type") == "stream_event" else line + b"\n"
            for line in blob.splitlines()
            if line.strip() and type(obj := orjson.loads(line)) is dict
        )
    cuts = list(range(0, len(blob), 4096))
    fast, _ = _read_lines(PLUGINS.dialect(dialect).host_codec(), blob, cuts)
    plain, _ = _read_all(PLUGINS.dialect(dialect).host_codec(), blob, cuts)
    if b'"text_delta"' in blob:
        assert any(type(ev) is TextDelta and type(ev._raw) is bytes for ev in fast), "the typed path was never taken"
    _same(fast, plain)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.sampled_from([b"", b" ", b"{}", b"[1]", b"x", b"\r", b'{"a":"b"}', b"\xff"]), max_size=12),
    cuts=st.lists(st.integers(0, 200), max_size=5),
)
def test_feed_lines_gives_the_lines_feed_parses(lines: list[bytes], cuts: list[int]) -> None:
    blob = b"\n".join(lines) + b"\n"
    plain, framed = JsonlReader(), JsonlReader()
    want: list[Any] = []
    got: list[Any] = []
    bounds = [0, *sorted({c for c in cuts if c <= len(blob)}), len(blob)]
    for lo, hi in itertools.pairwise(bounds):
        want.extend(plain.feed(blob[lo:hi]))
        for line in framed.feed_lines(blob[lo:hi]):
            got.extend(framed.parse(line))
    assert got == want
    assert framed.malformed_count == plain.malformed_count


def test_feed_lines_keeps_the_cap_and_the_lines_before_it() -> None:
    reader = JsonlReader(max_line_bytes=10)
    with pytest.raises(OutputOversize) as caught:
        reader.feed_lines(b'{"a":1}\n' + b"x" * 20 + b"\n")
    assert caught.value.objects == [b'{"a":1}']
    with pytest.raises(OutputOversize):  # the reader stays failed
        reader.feed_lines(b"{}\n")
    with pytest.raises(ValueError, match="on_oversize"):
        JsonlReader(on_oversize="skip").feed_lines(b"{}\n")


def test_text_delta_slots_build_the_event_the_constructor_builds() -> None:
    new, set_text, set_index, set_raw = text_delta_slots()
    line = b'{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"hi"}}'
    built = new()
    set_text(built, "hi")
    set_index(built, 2)
    set_raw(built, line)
    normal = TextDelta(text="hi", index=2, raw=line)
    assert type(built) is TextDelta
    assert built == normal and repr(built) == repr(normal) and hash(built) == hash(normal)
    assert pickle.loads(pickle.dumps(built)) == normal
    assert built.raw == normal.raw == orjson.loads(line)
    assert make_text_delta("hi", 2, line) == normal
    # The fast form, not the checked fallback: the slots' own descriptors.
    assert set_text == TextDelta.__dict__["text"].__set__


def test_the_default_decode_lines_is_general_per_line() -> None:
    class Plain(HostCodec):
        def encode_turn(self, turn: Any) -> bytes:
            return b"\n"

        def decode(self, obj: Any) -> list[Any]:
            return [obj]

    codec = Plain()
    assert codec.decode_lines([b"a", b"", b"b"], lambda line: [line, line] if line else []) == [b"a", b"a", b"b", b"b"]


def test_a_long_streamed_message_keeps_few_pieces_and_the_same_events() -> None:
    # Thousands of deltas of one message over many chunks, then its complete line: the
    # pieces kept for the complete line are joined as chunks go by, and the events are
    # still those of the plain path (nothing repeated, nothing lost).
    def delta(index: int, text: str) -> bytes:
        body = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}
        return orjson.dumps({"type": "stream_event", "event": body, "session_id": "s", "uuid": "u"})

    texts = {0: [f"a{i} " for i in range(3000)], 1: [f"b{i}\n" for i in range(700)]}
    lines = [b'{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","content":[]}}}']
    lines += [delta(i % 2 if i < 1400 else 0, texts[i % 2 if i < 1400 else 0].pop(0)) for i in range(3700)]
    complete = [
        {"type": "text", "text": "".join(f"a{i} " for i in range(3000)) + " and more"},
        {"type": "text", "text": "".join(f"b{i}\n" for i in range(700))},
    ]
    streamed = b"\n".join(lines) + b"\n"
    blob = streamed + orjson.dumps({"type": "assistant", "message": {"id": "m1", "content": complete}}) + b"\n"
    cuts = [*range(0, len(streamed), 8192), len(streamed)]
    codec = PLUGINS.dialect("stream-json").host_codec()
    reader = JsonlReader()
    fast: list[Any] = []
    for lo, hi in itertools.pairwise([*cuts, len(blob)]):
        if lo == len(streamed):
            # Before the complete line: each block's text is there, in few pieces.
            kept = codec._state.streamed[("text", "m1")]  # type: ignore[attr-defined]
            assert "".join(kept[0]) == "".join(f"a{i} " for i in range(3000))
            assert "".join(kept[1]) == "".join(f"b{i}\n" for i in range(700))
            assert len(kept[0]) + len(kept[1]) < 200
        chunk_lines = reader.feed_lines(blob[lo:hi])
        fast.extend(codec.decode_lines(chunk_lines, lambda line: decode_objects(codec, reader.parse(line))))
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), blob, cuts)
    _same(fast, plain)
    assert [ev.text for ev in fast[-1:]] == [" and more"]


def test_decode_lines_streams_a_whole_message() -> None:
    # Every delta kind the typed path takes, in the order the CLI streams a reply
    # with a tool call, then the complete lines that must not repeat it.
    def delta(index: int, body: dict[str, object], msg: str | None = "msg_1") -> bytes:
        obj: dict[str, object] = {
            "type": "stream_event",
            "event": {"type": "content_block_delta", "index": index, "delta": body},
            "session_id": "s",
            "uuid": "u",
        }
        if msg is not None:
            obj["api_message_id"] = msg
        return orjson.dumps(obj)

    tape = [
        b'{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1","content":[]}}}',
        delta(0, {"type": "thinking_delta", "thinking": "let me "}),
        delta(0, {"type": "thinking_delta", "thinking": "see"}, msg=None),
        delta(0, {"type": "signature_delta", "signature": "sig"}),
        delta(1, {"type": "text_delta", "text": "Reading "}),
        delta(1, {"type": "text_delta", "text": "it."}, msg=None),
        b'{"type":"stream_event","event":{"type":"content_block_start","index":2,'
        b'"content_block":{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}},"api_message_id":"msg_1"}',
        delta(2, {"type": "input_json_delta", "partial_json": '{"file_path":'}),
        delta(2, {"type": "input_json_delta", "partial_json": '"a.py"}'}, msg=None),
        b'{"type":"stream_event","event":{"type":"content_block_stop","index":2},"api_message_id":"msg_1"}',
        b'{"type":"assistant","message":{"id":"msg_1","content":[{"type":"thinking","thinking":"let me see"},'
        b'{"type":"text","text":"Reading it."},{"type":"tool_use","id":"toolu_1","name":"Read",'
        b'"input":{"file_path":"a.py"}}]}}',
        b'{"type":"result","subtype":"success","is_error":false,"result":"Reading it."}',
    ]
    blob = b"\n".join(tape) + b"\n"
    fast, _ = _read_lines(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    # The typed path took every line, the block start and stop of the streamed tool call too:
    # their events hold the line's bytes (until raw is read, as _same does).
    assert [type(ev._raw) is bytes for ev in fast] == [True] * 7
    _same(fast, plain)
    kinds = [(ev.type, getattr(ev, "text", None) or getattr(ev, "input", None)) for ev in fast]
    assert kinds == [
        ("thinking_delta", "let me "),
        ("thinking_delta", "see"),
        ("text_delta", "Reading "),
        ("text_delta", "it."),
        ("tool_use", {"file_path": "a.py"}),
        ("raw", None),  # the complete assistant line: all of it was streamed
        ("turn_completed", None),
    ]


_BLOCKS = [
    {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
    {"type": "tool_use", "id": "t1", "name": "", "input": {}},
    {"type": "tool_use", "id": "", "name": "Read"},
    {"type": "tool_use", "name": None},
    {"type": "tool_use", "id": 7, "name": "Read"},
    {"type": "text", "text": ""},
    {"id": "t1", "name": "Read"},
    None,
]


@pytest.mark.parametrize("block", _BLOCKS)
@pytest.mark.parametrize("index", [1, "1", True, None, 18446744073709551616])
@pytest.mark.parametrize("named", [True, False])
def test_decode_lines_reads_a_streamed_tool_call_as_the_plain_parse(block: object, index: object, named: bool) -> None:
    # A streamed tool call's start and stop, typed, give the plain parse's ToolUse (or nothing),
    # whatever the block and index hold; named: the events carry api_message_id, else only
    # message_start names the message.
    def wrapped(event: dict[str, object]) -> bytes:
        obj: dict[str, object] = {"type": "stream_event", "event": event, "session_id": "s", "uuid": "u"}
        if named:
            obj["api_message_id"] = "msg_1"
        return orjson.dumps(obj, option=orjson.OPT_PASSTHROUGH_DATACLASS) if type(index) is not int or index < 2**63 \
            else json.dumps(obj).encode()

    start: dict[str, object] = {"type": "content_block_start", "index": index}
    if block is not None:
        start["content_block"] = block
    tape = [
        wrapped({"type": "message_start", "message": {"id": "msg_1", "content": [], "usage": {}}}),
        wrapped(start),
        wrapped({"type": "content_block_delta", "index": index,
                 "delta": {"type": "input_json_delta", "partial_json": '{"file_path":"a.py"}'}}),
        wrapped({"type": "content_block_stop", "index": index}),
        wrapped({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        wrapped({"type": "message_stop"}),
    ]
    blob = b"\n".join(tape) + b"\n"
    fast, _ = _read_lines(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    streamed = type(block) is dict and block.get("type") == "tool_use" and type(index) is int and index < 2**63
    if streamed:  # the typed path took the stop line: the event holds its bytes
        (use,) = fast
        assert type(use._raw) is bytes and use.input == {"file_path": "a.py"}
    _same(fast, plain)
    assert [ev.type for ev in fast] == (["tool_use"] if streamed else [])


@pytest.mark.parametrize("message_id", [[], {}, ["msg_1"], 5, None])
def test_a_message_id_of_another_type_never_breaks_the_deltas_after_it(message_id: object) -> None:
    # A message_start whose id is an array once made every later text delta raise on the typed
    # path (the id keys what is streamed): now it is no id, and both paths give the same events.
    start = {"type": "stream_event", "event": {"type": "message_start", "message": {"id": message_id}}}
    delta = {"type": "stream_event", "event": {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": "hi"}}}
    blob = orjson.dumps(start) + b"\n" + orjson.dumps(delta) + b"\n"
    fast, _ = _read_lines(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    _same(fast, plain)
    assert [(ev.type, ev.text) for ev in fast] == [("text_delta", "hi")]


@pytest.mark.parametrize("thinking", [False, True])
def test_a_turn_of_many_messages_without_complete_lines_keeps_a_bounded_few(thinking: bool) -> None:
    # A CLI that streams message after message and never sends their complete lines: the codec
    # keeps what the latest messages streamed, not the turn's whole text, and both paths agree on
    # which (the complete lines that come at last repeat only the evicted messages' text).
    from agentrt_stream_json._host_stream import _KEEP_MESSAGES

    def line(obj: dict[str, object]) -> bytes:
        return orjson.dumps({"type": "stream_event", "event": obj, "session_id": "s", "uuid": "u"})

    n = _KEEP_MESSAGES + 10
    tape: list[bytes] = []
    for m in range(n):
        tape.append(line({"type": "message_start", "message": {"id": f"msg_{m}"}}))
        if thinking:  # a thinking block first: its kept text counts too, and may evict the cached text
            tape.append(line({"type": "content_block_delta", "index": 0,
                              "delta": {"type": "thinking_delta", "thinking": f"t{m}"}}))
        for piece in ("a", "b"):
            tape.append(line({"type": "content_block_delta", "index": 1,
                              "delta": {"type": "text_delta", "text": f"{piece}{m}"}}))
    for m in (0, n - 1):  # the oldest message's complete line, then the newest's
        tape.append(orjson.dumps({"type": "assistant", "message": {"id": f"msg_{m}", "content": [
            {"type": "text", "text": f"a{m}b{m}"}]}}))
    blob = b"\n".join(tape) + b"\n"
    codec = PLUGINS.dialect("stream-json").host_codec()
    fast, _ = _read_lines(codec, blob, list(range(0, len(blob), 997)))
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), blob, list(range(0, len(blob), 997)))
    _same(fast, plain)
    assert len(codec._state.streamed) <= _KEEP_MESSAGES  # type: ignore[attr-defined]
    tail = [(ev.type, getattr(ev, "text", None)) for ev in fast[-2:]]
    # msg_0 was let go long ago: its complete line is text again; msg_{n-1} was kept: nothing repeats.
    # (a complete line that adds nothing is a raw event)
    assert tail == [("text_delta", "a0b0"), ("raw", None)]


def test_the_cached_message_let_go_by_thinking_deltas_is_kept_again_on_both_paths() -> None:
    # The typed path caches the message its text deltas go to; thinking of many other messages
    # lets that one go (the oldest kept); its next text delta must be kept anew, as on the plain path.
    from agentrt_stream_json._host_stream import _KEEP_MESSAGES

    def delta(msg: str, body: dict[str, object]) -> bytes:
        return orjson.dumps({"type": "stream_event", "api_message_id": msg,
                             "event": {"type": "content_block_delta", "index": 0, "delta": body}})

    tape = [delta("msg_a", {"type": "text_delta", "text": "one "})]
    tape += [delta(f"msg_{m}", {"type": "thinking_delta", "thinking": "t"}) for m in range(_KEEP_MESSAGES + 1)]
    tape += [delta("msg_a", {"type": "text_delta", "text": "two"})]
    tape.append(orjson.dumps({"type": "assistant", "message": {"id": "msg_a", "content": [
        {"type": "text", "text": "two"}]}}))
    blob = b"\n".join(tape) + b"\n"
    fast, _ = _read_lines(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    plain, _ = _read_all(PLUGINS.dialect("stream-json").host_codec(), blob, [])
    _same(fast, plain)
    assert fast[-1].type == "raw"  # "two" was kept anew: the complete line repeats nothing
