"""JsonlReader: chunking independence, stripping, malformed lines, the 4 MiB cap."""

from __future__ import annotations

import itertools
import json
import pathlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt import AgentrtError
from agentrt._framing import (
    MAX_LINE_BYTES,
    JsonlReader,
    Malformed,
    OutputOversize,
    OversizeLine,
    encode_line,
    parse_line,
)

from ..plugin_data import CLAUDE_CODE_CAPTURES, CLAUDE_CODE_SHAPES, FASTAGENT_STDOUT

TESTS = pathlib.Path(__file__).resolve().parents[1]
CLAUDE = CLAUDE_CODE_CAPTURES
SHAPES = CLAUDE_CODE_SHAPES
FASTAGENT = FASTAGENT_STDOUT


def read_all(chunks: list[bytes]) -> list[Any]:
    reader = JsonlReader()
    out: list[Any] = []
    for chunk in chunks:
        out += reader.feed(chunk)
    out += reader.finish()
    return out


def rechunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def test_basic_lines_and_blank_lines() -> None:
    data = b'{"a":1}\n\n   \n{"b":[1,2]}\r\n  {"c":"x"}  \n'
    assert read_all([data]) == [{"a": 1}, {"b": [1, 2]}, {"c": "x"}]


def test_crlf_and_unicode_whitespace_are_stripped() -> None:
    # \x0c and U+FEFF are not JSON whitespace, but JavaScript's trim() removes them.
    data = '\ufeff{"a":1}\x0c\r\n\xa0\n'.encode()
    assert read_all([data]) == [{"a": 1}]


def test_final_unterminated_line_is_parsed_by_finish() -> None:
    reader = JsonlReader()
    assert reader.feed(b'{"a":1}\n{"b":') == [{"a": 1}]
    assert reader.pending_bytes == 5
    assert reader.feed(b"2}") == []
    assert reader.finish() == [{"b": 2}]
    assert reader.finish() == []


def test_final_line_with_only_cr_is_skipped() -> None:
    assert read_all([b'{"a":1}\n\r']) == [{"a": 1}]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    data = b'{"t":"caf\xc3"}\n{"t":"ok"}\n'
    out = read_all([data])
    assert out == [{"t": "caf\ufffd"}, {"t": "ok"}]


def test_split_multibyte_character_across_chunks() -> None:
    data = '{"t":"日本語"}\n'.encode()
    cut = data.index("本".encode()) + 1  # in the middle of a 3-byte sequence
    assert read_all([data[:cut], data[cut:]]) == [{"t": "日本語"}]


def test_malformed_count_and_head() -> None:
    long_garbage = b"x" * 500
    data = b'{"a":1}\nnot json\n' + long_garbage + b'\n{"b":2}\n{broken\n'
    out = read_all([data])
    assert out[0] == {"a": 1}
    assert out[1] == Malformed(1, b"not json")
    assert out[2] == Malformed(2, b"x" * 200)
    assert out[3] == {"b": 2}
    assert out[4] == Malformed(3, b"{broken")
    assert len(out) == 5


def test_javascript_accepts_what_orjson_refuses() -> None:
    # JSON.parse gives Infinity for 1e400 and keeps lone surrogate escapes
    # (which the framing then repairs: see the test below).
    out = read_all([b'{"n":1e400}\n"\\ud800"\n'])
    assert out[0] == {"n": float("inf")}
    assert out[1] == "\ufffd"
    # NaN is not JSON for JSON.parse either.
    assert isinstance(read_all([b"NaN\n"])[0], Malformed)


def test_complete_line_of_exactly_the_cap_is_accepted() -> None:
    body = b'"' + b"a" * (MAX_LINE_BYTES - 2) + b'"'
    assert len(body) == MAX_LINE_BYTES
    out = read_all([body + b"\n", b'{"after":1}\n'])
    assert out == ["a" * (MAX_LINE_BYTES - 2), {"after": 1}]
    # Same bytes in 64 KiB chunks: same result.
    data = body + b'\n{"after":1}\n'
    assert read_all([data[i : i + 65536] for i in range(0, len(data), 65536)]) == out


@pytest.mark.parametrize("chunk", [65536, 1 << 20, MAX_LINE_BYTES + 1, 10 << 20])
def test_cap_plus_one_without_newline_is_oversize_whatever_the_chunking(chunk: int) -> None:
    data = b'{"a":1}\n' + b"x" * (MAX_LINE_BYTES + 1)
    reader = JsonlReader()
    got: list[Any] = []
    with pytest.raises(OutputOversize) as info:
        for i in range(0, len(data), chunk):
            got += reader.feed(data[i : i + chunk])
    assert info.value.code == "runtime_output_oversize"
    assert isinstance(info.value, AgentrtError)
    # The line before the flood is never lost, wherever the chunk boundaries fall.
    assert got + info.value.objects == [{"a": 1}]
    # The reader stays failed.
    with pytest.raises(AgentrtError):
        reader.feed(b"{}\n")
    with pytest.raises(AgentrtError):
        reader.finish()


def test_terminated_line_over_the_cap_is_oversize_too() -> None:
    # Byte by byte, MAX+1 bytes without a newline must fail; so must one big chunk.
    data = b"x" * (MAX_LINE_BYTES + 1) + b"\n"
    with pytest.raises(OutputOversize):
        read_all([data])


def test_flood_is_rejected_without_buffering_it_all() -> None:
    reader = JsonlReader()
    chunk = b"y" * 65536
    fed = 0
    with pytest.raises(OutputOversize):
        for _ in range(160):  # 10 MiB
            reader.feed(chunk)
            fed += len(chunk)
            assert reader.pending_bytes <= MAX_LINE_BYTES
    assert fed == MAX_LINE_BYTES  # the failing feed was the first past the cap
    assert reader.pending_bytes == 0


def test_big_line_in_small_chunks_is_joined_once() -> None:
    obj = {"content": "z" * 1_000_000}
    data = encode_line(obj)
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert read_all(chunks) == [obj]


def test_encode_line_round_trip() -> None:
    obj = {"type": "user", "text": "café → 日本語 🎉"}
    line = encode_line(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert "🎉".encode() in line  # raw UTF-8, not \u escapes
    assert read_all([line]) == [obj]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
_line = st.one_of(
    _json_values.map(lambda v: orjson.dumps(v)),
    st.sampled_from([b"", b"   ", b"\r", b"not json", b"{", b"\xff\xfe", b'"caf\xc3"', b"  [1] \r"]),
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_line, max_size=30),
    final_newline=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=25),
)
def test_any_chunking_gives_the_same_objects(lines: list[bytes], final_newline: bool, cuts: list[int]) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    whole = read_all([data])
    assert read_all(rechunk(data, cuts)) == whole
    byte_by_byte = read_all([data[i : i + 1] for i in range(len(data))])
    assert byte_by_byte == whole
    # And the result matches an independent line-by-line reading.
    expected: list[Any] = []
    count = 0
    for raw in data.split(b"\n"):
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            continue
        try:
            expected.append(json.loads(text))
        except ValueError:
            count += 1
            expected.append(Malformed(count, raw.strip()[:200]))
    assert whole == expected


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in CLAUDE.glob("*.stdout.jsonl")) + [SHAPES.name],
)
def test_real_claude_code_captures_parse_cleanly(name: str) -> None:
    data = (SHAPES if name == SHAPES.name else CLAUDE / name).read_bytes()
    expected = [json.loads(line) for line in data.splitlines() if line.strip()]
    out = read_all([data[i : i + 4096] for i in range(0, len(data), 4096)])
    assert not any(isinstance(o, Malformed) for o in out)
    assert out == expected
    assert all(isinstance(o, dict) and "type" in o for o in out)


@pytest.mark.parametrize("name", sorted(p.name for p in FASTAGENT.glob("*.jsonl")))
def test_real_fastagent_captures_parse_cleanly(name: str) -> None:
    data = (FASTAGENT / name).read_bytes()
    out = read_all(rechunk(data, [7, 100, 333, 1000]))
    assert out == [json.loads(line) for line in data.splitlines() if line.strip()]
    assert out and all(isinstance(o, dict) for o in out)


def outcome(chunks: list[bytes]) -> tuple[list[Any], bool]:
    """(every object delivered, whether the oversize error was raised)."""
    reader = JsonlReader()
    out: list[Any] = []
    try:
        for chunk in chunks:
            out += reader.feed(chunk)
        out += reader.finish()
    except OutputOversize as exc:
        return out + exc.objects, True
    return out, False


@settings(max_examples=25, deadline=None)
@given(
    before=st.lists(_line, max_size=5),
    size=st.sampled_from([MAX_LINE_BYTES - 1, MAX_LINE_BYTES, MAX_LINE_BYTES + 1]),
    newline=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=MAX_LINE_BYTES + 200), max_size=6),
)
def test_the_cap_does_not_depend_on_chunking(before: list[bytes], size: int, newline: bool, cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in before) + b"z" * size + (b"\n{}\n" if newline else b"")
    whole = outcome([data])
    assert outcome(rechunk(data, cuts)) == whole
    assert whole[1] is (size > MAX_LINE_BYTES)
    assert whole[0][: len(read_all([b"\n".join(before) + b"\n"]))] == read_all([b"\n".join(before) + b"\n"])


def test_nesting_deeper_than_the_parsers_go_is_malformed_not_a_crash() -> None:
    # orjson stops at 1024 levels and the stdlib fallback then overflows the
    # recursion limit: the line is malformed, the stream goes on.
    deep = b"[" * 5000 + b"]" * 5000
    reader = JsonlReader()
    out = reader.feed(deep + b'\n{"ok":1}\n')
    assert type(out[0]) is Malformed and out[0].count == 1 and out[1:] == [{"ok": 1}]
    assert parse_line(deep) is None


def test_parse_line_applies_the_framing_rules() -> None:
    assert parse_line(b'{"a":1}\r') == {"a": 1}
    assert parse_line(b'{"a":"\xff"}') == {"a": "\ufffd"}  # invalid UTF-8 replaced
    assert parse_line(b'{"a":1e999}') == {"a": float("inf")}  # what JSON.parse keeps
    assert parse_line(b"   ") is None and parse_line(b"{nope") is None


def test_a_line_loader_parses_first_and_refusals_take_the_lenient_path() -> None:
    seen: list[bytes] = []

    def loads(line: bytes) -> Any:
        seen.append(line)
        if line.startswith(b'{"typed"'):
            return ("typed", line)
        return orjson.loads(line)  # raises a ValueError for what it refuses

    reader = JsonlReader(loads)
    out = reader.feed(b'{"typed":1}\n{"a":"\xff"}\n\nnot json\n')
    assert out[0] == ("typed", b'{"typed":1}')
    assert out[1] == {"a": "\ufffd"} and type(out[2]) is Malformed
    assert b'{"typed":1}' in seen
    # The single-line fast path uses it too.
    assert JsonlReader(loads).feed(b'{"typed":2}\n') == [("typed", b'{"typed":2}\n')]


def test_lazy_raw_is_parsed_once_on_first_read() -> None:
    from agentrt.events import TextDelta, from_json, to_json

    ev = TextDelta(text="x", raw=b'{"type":"x","n":1}')
    assert ev._raw.__class__ is bytes  # nothing parsed yet
    first = ev.raw
    assert first == {"type": "x", "n": 1} and ev.raw is first  # parsed once, then kept
    assert to_json(ev) == {"type": "text_delta", "text": "x", "index": 0}
    assert to_json(ev, raw=True)["raw"] is first
    assert from_json(to_json(ev, raw=True)).raw == first
    assert repr(ev) == "TextDelta(text='x', index=0)"
    assert TextDelta(text="x", raw=b"not json").raw is None  # a line that was not JSON after all


_LONE = [
    (rb'"\ud83d"', "\ufffd"),  # JavaScript's slice() cut an emoji in half
    (rb'"ab\ude00"', "ab\ufffd"),  # the other half
    (rb'"\uD83D\uD83D"', "\ufffd\ufffd"),  # upper-case, two highs
    (rb'"\ud83d\u0041"', "\ufffdA"),
    (rb'"\ud83d\ude00 ok"', "\U0001f600 ok"),  # a real pair is untouched
    (rb'"\\ud83d"', "\\ud83d"),  # an escaped backslash: no escape at all
]


@pytest.mark.parametrize(("escaped", "text"), _LONE)
def test_lone_surrogate_escapes_become_replacement_characters(escaped: bytes, text: str) -> None:
    line = b'{"type":"x","k\\udc00":[' + escaped + b',{"deep":' + escaped + b"}]}"
    want = {"type": "x", "k\ufffd": [text, {"deep": text}]}
    for loads in (None, _typed_loader()):
        reader = JsonlReader(loads)
        assert reader.feed(line + b"\n") == [want]
        assert reader.feed(b"{}\n" + line + b"\n") == [{}, want]  # the batch path too
    assert parse_line(line) == want
    # Every string can be encoded now, which is what every sink does.
    orjson.dumps(want)
    assert json.dumps(want, ensure_ascii=False).encode("utf-8")


def _typed_loader() -> Any:
    # A typed first parse (loads=) makes one: msgspec into a struct, else orjson.
    import msgspec

    from agentrt_awp_jsonl.anthropic import BlockDelta

    decode = msgspec.json.Decoder(BlockDelta).decode

    def loads(line: bytes) -> Any:
        if line.startswith(b'{"type":'):
            try:
                return (decode(line), line)
            except msgspec.DecodeError:
                pass
        return orjson.loads(line)

    return loads


def test_lone_surrogate_in_a_typed_delta_line_is_repaired_on_both_paths() -> None:
    from agentrt._line_parse import decode_objects
    from agentrt._plugins import Plugins

    line = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi \\ud83d"}}'
    want = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi \ufffd"}}
    assert JsonlReader().feed(line + b"\n") == [want]
    # awp-jsonl's chunk-at-a-time path: msgspec refuses the line, the framing repairs it.
    codec = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl"}).dialect("awp-jsonl").host_codec()
    reader = JsonlReader()
    events = codec.decode_lines(reader.feed_lines(line + b"\n"), lambda one: decode_objects(codec, reader.parse(one)))
    assert [(ev.type, getattr(ev, "text", None)) for ev in events] == [("text_delta", "hi \ufffd")]
    assert events[0].raw == want


# --- on_oversize="skip": a long line is a marker, not the end of the stream ---


def _read_skipping(chunks: list[bytes], limit: int) -> list[Any]:
    reader = JsonlReader(max_line_bytes=limit, on_oversize="skip")
    out: list[Any] = []
    for chunk in chunks:
        out += reader.feed(chunk)
    return out + reader.finish()


def test_skip_mode_replaces_an_oversize_line_with_its_size_and_reads_on() -> None:
    data = b'{"a":1}\n' + b'"' + b"x" * 20 + b'"\n{"b":2}\n' + b"y" * 11
    assert _read_skipping([data], 10) == [{"a": 1}, OversizeLine(22), {"b": 2}, OversizeLine(11)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=8),
    st.booleans(),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_skip_mode_gives_the_same_answer_for_every_chunking(sizes: list[int], newline: bool, cuts: list[int]) -> None:
    limit = 12
    lines = [b"[" + b"1," * max(0, (n - 2) // 2) + b"1]" if n >= 3 else b"" for n in sizes]
    data = b"\n".join(lines) + (b"\n" if newline else b"")
    expected: list[Any] = []
    for line in lines:
        if len(line) > limit:
            expected.append(OversizeLine(len(line)))
        elif line:
            expected.append(orjson.loads(line))
    assert _read_skipping(rechunk(data, cuts), limit) == expected


def test_skip_mode_keeps_memory_bounded_by_the_cap() -> None:
    reader = JsonlReader(max_line_bytes=100, on_oversize="skip")
    for _ in range(50):
        assert reader.feed(b"z" * 64) == []
        assert reader.pending_bytes <= 100
    assert reader.feed(b"\n[1]\n") == [OversizeLine(3200), [1]]


def test_an_unknown_oversize_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="on_oversize"):
        JsonlReader(on_oversize="truncate")  # type: ignore[arg-type]
