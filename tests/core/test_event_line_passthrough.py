"""``run --json`` writes an unread tool input or result through as its own bytes, only when exact.

Every line stays one line of valid UTF-8 JSON whose value is the event's JSON
form; a fragment whose bytes would read differently from the framing's parse
(invalid UTF-8, a lone surrogate escape, an integer past 64 bits, a number
that overflows, a duplicate key, whitespace) is parsed and encoded as before.
The hypothesis property spells values in many ways, odd ones included, and
checks each line with two different JSON readers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt._eventjson import event_line
from agentrt._json.fragment_passthrough import BUDGET, fragment_bytes
from agentrt._json.lazy_fields import stored_getter
from agentrt._line_parse import decode_objects
from agentrt._plugins import Plugins
from agentrt.dialect import JsonFragment
from agentrt.events import ToolResult, ToolUse, to_json
from agentrt.lowlevel import JsonlReader, parse_fragment

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "corpus.py"
_stored_content = stored_getter(ToolResult, "content")
_stored_input = stored_getter(ToolUse, "input")


def _result(data: bytes) -> ToolResult:
    return ToolResult(tool_use_id="t", content=JsonFragment(data))


def _use(data: bytes) -> ToolUse:
    return ToolUse(id="t", name="Bash", input=JsonFragment(data, mapping=True), summary="s")


def _passed(event: Any) -> bool:
    """Whether event_line left the fragment unread (so it wrote the bytes through)."""
    if type(event) is ToolResult:
        return type(_stored_content(event, ToolResult)) is JsonFragment
    return type(_stored_input(event, ToolUse)) is JsonFragment


def _check(make: Any, data: bytes) -> bool:
    """The line invariants for one fragment; returns whether it was passed through."""
    event = make(data)
    line = event_line(event)
    passed = _passed(event)
    # One line of valid UTF-8.
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    text = line.decode("utf-8")
    # The same JSON value as the event's JSON form (encoded, as the old line was),
    # read by orjson and by the standard library alike.
    reference = make(data)
    old_line = orjson.dumps(to_json(reference)) + b"\n"
    expected = orjson.loads(old_line)
    assert orjson.loads(line) == expected
    assert json.loads(text) == json.loads(old_line)
    if passed:
        assert data in line
    else:
        assert line == old_line
    # Canonical spelling: the very bytes of the old encoder.
    value = parse_fragment(data)
    if value is not None and orjson.dumps(value) == data:
        assert line == old_line
    # Once read, the event encodes as before, from its value.
    if type(event) is ToolResult:
        assert event.content == reference.content
    else:
        assert event.input == reference.input
    assert event_line(event) == old_line and not _passed(event)
    return passed


CANONICAL = [
    b'"plain text"',
    '"caf\u00e9 \u2192 \u65e5\u672c\u8a9e\\n\\"q\\" \\\\ \\t \\u001f \x7f \u2028"'.encode(),
    b'{"file_path":"a.py","old_string":"x","new_string":"y"}',
    b'[{"type":"text","text":"out"},{"type":"image","n":[1,-2,3.5,0.1,true,false,null,{}]}]',
    b'{"n":9223372036854775807,"m":-922337203685477580,"k":1234567890123456789}',
    b"{}",
    b"[]",
]


@pytest.mark.parametrize("data", CANONICAL)
def test_a_canonical_fragment_is_written_through_unread(data: bytes) -> None:
    passed = _check(_result, data)
    assert passed
    if data.startswith(b"{"):
        assert _check(_use, data)


# Each would read differently written through, or is spelled with whitespace.
SCREENED = {
    "invalid_utf8": b'"ls\xff -l"',
    "utf8_encoded_surrogate": b'{"a":"\xed\xa0\x80"}',
    "truncated_utf8": b'["\xc3"]',
    "lone_surrogate": b'"git \\ud83d status"',
    "lone_low_surrogate": b'{"k\\udc00":1}',
    "past_64_bits": b'{"limit":18446744073709551616}',
    "below_64_bits": b"[-9223372036854775809]",
    "twenty_digits": b"[10000000000000000000]",
    "int64_min": b"[-9223372036854775808]",
    "overflow": b'{"x":1e400}',
    "negative_overflow": b"[-1e400]",
    "underflow": b"[1e-400]",
    "exponent": b"[1E5]",
    "duplicate_key": b'{"command":"a","command":"b"}',
    "nested_duplicate_key": b'[{"a":1,"b":{"c":1,"c":2}}]',
    "escaped_duplicate_key": b'{"a":1,"\\u0061":2}',
    "whitespace": b'{"a": 1}',
    "carriage_return": b'[1,\r2]',
    "newline": b'{"a":\n1}',
    "leading_space": b' "x"',
    "trailing_space": b'"x" ',
    "top_level_number": b"18446744073709551616",
    "top_level_literal": b"true",
    "not_json": b'{"a":',
    "two_values": b'"a""b"',
}


@pytest.mark.parametrize("data", list(SCREENED.values()), ids=list(SCREENED))
def test_a_fragment_that_may_read_differently_is_parsed_and_encoded(data: bytes) -> None:
    assert fragment_bytes(data) is None
    assert not _check(_result, data)
    assert not _check(_use, data)


def test_a_mapping_field_passes_only_an_object() -> None:
    assert not _check(_use, b'"text"')
    assert not _check(_use, b"[1]")
    assert _check(_use, b'{"a":[1]}')
    assert _check(_result, b"[1]")


def test_a_fragment_with_many_items_is_parsed_and_encoded() -> None:
    assert _check(_result, orjson.dumps(list(range(BUDGET))))
    assert not _check(_result, orjson.dumps(list(range(BUDGET + 1))))
    nested = orjson.dumps([[0] * (BUDGET // 2), [0] * (BUDGET // 2)])
    assert not _check(_result, nested)


def test_a_non_canonical_spelling_of_the_same_value_is_written_as_spelled() -> None:
    # The value is the same for every reader; the agent's spelling is kept.
    for data in (b'"\\u00e9\\/"', b'["\\ud83d\\ude00"]', b"[1.50,-0]"):
        assert _check(_result, data)


# Leaves spelled as raw bytes: what a JSON writer may produce and orjson reads otherwise.
_ODD_LEAVES = [
    b"1e400", b"-1e400", b"1e-400", b"1E5", b"18446744073709551616", b"-9223372036854775809",
    b"18446744073709551615", b"-0", b"1.50", b"0.1000000000000000055511151231257827",
    b'"\\ud800"', b'"x\\udc00"', b'"\\ud83d\\ude00"', b'"\\u00e9\\/"', b'"\xff"', b'"\xc3"',
    b'"\xed\xa0\x80"', b'"\xf0\x9f\x98\x80"', b"true", b"false", b"null",
]
_GAPS = st.sampled_from([b""] * 12 + [b" ", b"\t", b"\r"])


@st.composite
def _spelled(draw: Any, depth: int = 0) -> bytes:
    plain = ["leaf", "leaf", "text", "text", "text", "odd"]
    kind = draw(st.sampled_from([*plain, "list", "object", "object"] if depth < 3 else plain))
    if kind == "odd":
        return draw(st.sampled_from(_ODD_LEAVES))
    if kind == "leaf":
        value = draw(st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.integers(-(2**16), 2**16),
                               st.floats(allow_nan=False, allow_infinity=False)))
        return json.dumps(value).encode()  # integers past 64 bits too
    if kind == "text":
        text = draw(st.text(max_size=12))
        if draw(st.booleans()):
            return json.dumps(text, ensure_ascii=True).encode()  # lone surrogates as escapes too
        return json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
    items = draw(st.lists(_spelled(depth + 1), max_size=4))
    if kind == "list":
        parts = [draw(_GAPS) + item + draw(_GAPS) for item in items]
        return b"[" + b",".join(parts) + b"]"
    keys = [json.dumps(draw(st.sampled_from(["a", "b", "c", "\u00e9"])), ensure_ascii=draw(st.booleans())).encode()
            for _ in items]  # few keys, so duplicates come up
    parts = [key + draw(_GAPS) + b":" + draw(_GAPS) + item for key, item in zip(keys, items, strict=True)]
    return b"{" + b",".join(parts) + b"}"


@settings(max_examples=400, deadline=None)
@given(_spelled())
def test_every_fragment_gives_a_valid_line_of_the_same_value(data: bytes) -> None:
    _check(_result, data)
    _check(_use, data)


def _corpus_lines() -> list[bytes]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_corpus", CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [line for kind, line in module.corpus_lines(600, big_lines=False)]


def test_the_corpus_tool_payloads_are_written_through_as_the_old_bytes() -> None:
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "stream-json"})
    blob = b"".join(_corpus_lines())
    typed_codec = plugins.dialect("stream-json").host_codec()
    # The host path's typed parse: decode_lines, as the pump reads stream-json.
    reader = JsonlReader()
    typed = typed_codec.decode_lines(
        reader.feed_lines(blob), lambda line: decode_objects(typed_codec, reader.parse(line))
    )
    plain_codec = plugins.dialect("stream-json").host_codec()
    plain = [ev for obj in JsonlReader().feed(blob) for ev in plain_codec.decode(obj)]
    lines = [event_line(ev) for ev in typed]
    payload_events = [ev for ev in typed if type(ev) in (ToolUse, ToolResult)]
    assert len(payload_events) > 20
    # Written through: none was parsed to encode it.
    assert all(_passed(ev) for ev in payload_events)
    assert lines == [orjson.dumps(to_json(ev)) + b"\n" for ev in plain]


def test_without_msgspec_every_fragment_is_parsed_and_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentrt._json import fragment_passthrough as _jsonpass

    monkeypatch.setattr(_jsonpass, "_validate", None)  # as when msgspec is not installed
    assert not _check(_result, CANONICAL[2])


def test_an_event_read_before_printing_encodes_from_its_value() -> None:
    data = b'{"file_path":"a.py","old_string":"caf\\u00e9"}'  # would be passed through, spelled so
    event = _use(data)
    assert event.input == {"file_path": "a.py", "old_string": "caf\u00e9"}
    line = event_line(event)
    assert not _passed(event) and data not in line
    assert line == orjson.dumps(to_json(event)) + b"\n"
    fresh = _use(data)
    assert data in event_line(fresh) and _passed(fresh)


def test_a_large_fragment_is_checked_piece_by_piece_across_a_cut_character() -> None:
    # 64 KiB pieces: a 4-byte character across the first cut, and bad bytes far past it.
    text = "a" * 65534 + "\U0001f642" + "é" * 40_000
    data = json.dumps(text, ensure_ascii=False).encode()
    assert _check(_result, data)
    for bad in (b"\xff", b"\xc3", b"\xed\xa0\x80"):
        broken = data[:-1] + bad + b'"'
        assert fragment_bytes(broken) is None
        assert not _check(_result, broken)


def test_a_passed_fragment_is_written_from_its_own_buffer() -> None:
    import msgspec

    from agentrt._eventjson import event_parts

    raw = msgspec.json.decode(b'{"c":"caf\xc3\xa9 \\"q\\""}', type=dict[str, msgspec.Raw])["c"]
    event = _result(raw)
    parts = event_parts(event)
    assert isinstance(parts, list) and any(part is raw for part in parts)  # joined once, never copied before
    assert b"".join(parts) == event_line(_result(raw)) == orjson.dumps(to_json(_result(raw))) + b"\n"
    assert _passed(event)
