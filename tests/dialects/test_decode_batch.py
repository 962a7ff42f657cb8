"""The plain host path (orjson, ``decode`` per object), the lines the fast path is held to it on, and make_text_delta.

awp-jsonl and stream-json decode a read's lines in one loop
(``decode_lines``, tests/dialects/test_decode_lines.py); this module holds
the reference it must equal (:func:`_read_all`) and the property-test lines
(odd shapes of every line kind the typed parse takes) it is checked on.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt._plugins import Plugins
from agentrt.dialect import make_text_delta
from agentrt.events import TextDelta

from ..plugin_data import CLAUDE_CODE_CAPTURES

ROOT = Path(__file__).resolve().parents[2]
CAPTURE_DIR = CLAUDE_CODE_CAPTURES
CAPTURES = sorted(CAPTURE_DIR.glob("*.stdout.jsonl"))
PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl,stream-json"})


def _corpus_module() -> Any:
    spec = importlib.util.spec_from_file_location("agentrt_test_corpus", ROOT / "bench" / "corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Objects shaped like the text-delta lines the fast path inlines, with every
# part that the inlined path checks varied: missing, of the wrong JSON type,
# empty, or an index that is a bool.
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3), st.just([]), st.just({}))


def _usually(value: object, other: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    # The shape the fast path wants about three times in four, else something else.
    return st.one_of(st.just(value), st.just(value), st.just(value), other)


_texts = st.one_of(st.text(min_size=1, max_size=5), st.just(""), _json_leaf)
# Past 64 bits too: msgspec reads any integer as an int, the framing one past 64 bits as a double.
_indices = st.one_of(st.integers(0, 3), st.booleans(), _json_leaf, st.sampled_from([2**64 - 1, 2**64, -(2**63) - 1]))


def _maybe(draw: st.DrawFn, obj: dict[str, object], key: str, value: object) -> None:
    if draw(st.integers(0, 9)):  # mostly present
        obj[key] = value


@st.composite
def _delta_like(draw: st.DrawFn, wrapped: bool) -> object:
    if not draw(st.integers(0, 12)):
        return draw(_json_leaf)  # not an object at all
    delta: dict[str, object] = {}
    _maybe(draw, delta, "type", draw(_usually("text_delta", st.sampled_from(["thinking_delta", "input_json_delta"]))))
    _maybe(draw, delta, "text", draw(_texts))
    _maybe(draw, delta, "thinking", draw(_texts))
    inner: dict[str, object] = {}
    _maybe(draw, inner, "type", draw(_usually("content_block_delta", st.sampled_from(["message_start", "other"]))))
    _maybe(draw, inner, "index", draw(_indices))
    _maybe(draw, inner, "delta", draw(_usually(delta, _json_leaf)))
    if not wrapped:
        return inner
    outer: dict[str, object] = {}
    _maybe(draw, outer, "type", draw(_usually("stream_event", st.sampled_from(["content_block_delta", "assistant"]))))
    _maybe(draw, outer, "event", draw(_usually(inner, _json_leaf)))
    if draw(st.booleans()):
        outer["api_message_id"] = draw(st.sampled_from(["msg_a", "msg_b", None, 3]))
    return outer


@given(text=st.text(), index=st.integers(0, 1 << 40))
def test_make_text_delta_is_the_constructor_made_cheap(text: str, index: int) -> None:
    raw = {"any": "object"}
    fast = make_text_delta(text, index, raw)
    slow = TextDelta(text=text, index=index, raw=raw)
    assert type(fast) is TextDelta
    assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
    assert fast.raw is raw
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.text = "changed"  # type: ignore[misc]


def test_make_text_delta_takes_its_fast_path() -> None:
    # The fast builder silently falls back to the constructor when the event
    # class no longer has the slots it fills; the host path's budget needs it.
    assert make_text_delta.__name__ == "fast"


# -- lines of every kind the typed parse takes, odd ones too --------------------------

_extra_value = st.recursive(
    _json_leaf | st.floats(allow_nan=False) | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _delta_line(draw: st.DrawFn, wrapped: bool) -> bytes:
    # A copy: the strategies share leaf objects ({} and []), never to be mutated.
    obj = copy.deepcopy(draw(_delta_like(wrapped)))
    if isinstance(obj, dict):
        # The keys the real CLI adds after "event", with values of any shape.
        for key in ("session_id", "parent_tool_use_id", "uuid"):
            if draw(st.integers(0, 3)):
                obj[key] = copy.deepcopy(draw(st.one_of(st.text(max_size=8), _extra_value)))
    # The stdlib's encoder writes what orjson refuses to (big integers, Infinity).
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    mutation = draw(st.integers(0, 9))
    if mutation == 1 and b'"uuid":"' in line:
        # Invalid UTF-8 inside a string the typed parse skips.
        at = line.index(b'"uuid":"') + len(b'"uuid":"')
        line = line[:at] + b"\xff" + line[at:]
    elif mutation == 2 and line.startswith(b'{"type":'):
        # A duplicate key later in the object: the last one wins in every parser.
        line = line[:-1] + b',"type":' + orjson.dumps(draw(st.sampled_from(["stream_event", "user", "result"]))) + b"}"
    elif mutation == 3:
        line = line + b" \r"
    elif mutation == 4:
        line = line[: draw(st.integers(0, len(line)))]  # truncated: malformed or blank
    elif mutation == 5 and line.endswith(b"}"):
        line = line[:-1] + b',"x":1e999}'  # JSON.parse's Infinity: orjson refuses it, the framing keeps it
    return line


def _read_all(codec: object, data: bytes, cuts: list[int]) -> tuple[list[object], int]:
    # The plain path: orjson and the framing's rules, decode per object; the reference
    # every codec's decode_lines is held to.
    from agentrt._framing import JsonlReader, Malformed

    reader = JsonlReader()
    events: list[object] = []
    bounds = [0, *sorted(set(cuts)), len(data)]
    for lo, hi in itertools.pairwise(bounds):
        objs = reader.feed(data[lo:hi])
        events.extend(ev for obj in objs if type(obj) is not Malformed for ev in codec.decode(obj))  # type: ignore[attr-defined]
    for obj in reader.finish():
        if type(obj) is not Malformed:
            events.extend(codec.decode(obj))  # type: ignore[attr-defined]
    return events, reader.malformed_count


@st.composite
def _cli_delta_line(draw: st.DrawFn, wrapped: bool) -> bytes:
    # As the real CLI writes them (the typed path's shape), text of any kind.
    kind = draw(st.sampled_from(["text_delta", "text_delta", "thinking_delta", "input_json_delta", "signature_delta"]))
    key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}.get(
        kind, "signature"
    )
    event = {
        "type": "content_block_delta",
        "index": draw(st.integers(0, 2)),
        "delta": {"type": kind, key: draw(st.text(max_size=6) | _text_with_surrogates)},
    }
    # A lone surrogate can only be written escaped (JSON.stringify's way); both parses must repair it.
    ascii_only = draw(st.booleans())
    if not wrapped:  # awp-jsonl: the raw API event itself
        return json.dumps(event, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")
    obj: dict[str, object] = {"type": "stream_event", "event": event, "session_id": "s", "parent_tool_use_id": None}
    obj["uuid"] = draw(st.text(max_size=4))
    if draw(st.booleans()):
        obj["api_message_id"] = draw(st.sampled_from(["msg_a", "msg_b", None, ""]))
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")


# Text with halves of surrogate pairs among ordinary characters (an emoji cut by slice()).
_text_with_surrogates = st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.sampled_from(["a", "\U0001f600", "\\"]),
    max_size=4,
)


_odd_value = st.one_of(
    st.text(max_size=4) | _text_with_surrogates,
    _extra_value,
    st.just(1 << 70),  # past 64 bits: orjson (and so the kept fragments) refuse it
    st.just({"k": [1 << 65]}),
)


# Around the 64-bit edges, where orjson and msgspec read integers differently.
_numbers = st.one_of(st.integers(), st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 1.5, -0.0]))


_mostly_plain = _usually("p", st.text(max_size=4) | _text_with_surrogates)


@st.composite
def _cli_other_line(draw: st.DrawFn) -> bytes:
    # The other line kinds the CLI prints (stream-json's typed parse takes them), with odd values now and then.
    def value(usual: object) -> object:
        return draw(_usually(usual, _odd_value)) if draw(st.integers(0, 3)) == 0 else usual

    kind = draw(st.sampled_from(["assistant", "user", "result", "rate_limit_event"]))
    obj: dict[str, object] = {"type": kind}
    if kind == "assistant":
        blocks: list[object] = []
        for _ in range(draw(st.integers(0, 3))):
            btype = draw(st.sampled_from(["text", "thinking", "tool_use", "tool_use", "image"]))
            if btype == "tool_use":
                name = draw(st.sampled_from(["Read", "Bash", "mcp__s__Edit", "Grep"]))
                block = {"type": btype, "id": value(draw(st.sampled_from(["t1", "t2"]))), "name": value(name)}
                tool_input = {"file_path": draw(_mostly_plain), "limit": draw(_numbers)}
                if draw(st.booleans()):  # the keys the labels read, of any JSON type now and then
                    tool_input[draw(st.sampled_from(["command", "cmd", "path"]))] = value("ls -l\nx")
                block["input"] = value(tool_input)
            else:
                block = {"type": btype, btype: value(draw(st.sampled_from(["ab", "a", "abc", "xy", ""])))}
            blocks.append(block)
        obj["message"] = {"id": value(draw(st.sampled_from(["msg_a", "msg_b"]))), "model": "m", "content": blocks}
        if draw(st.integers(0, 5)) == 0:
            obj["error"] = value("rate_limit")
    elif kind == "user":
        error = draw(st.booleans())
        result = draw(st.sampled_from(["out", [{"type": "text", "text": "out"}], {"n": 2**64 - 1}]))
        content = [
            {"tool_use_id": value("t1"), "type": "tool_result", "content": value(result), "is_error": value(error)}
            for _ in range(draw(st.integers(0, 2)))
        ]
        obj["message"] = {"role": "user", "content": value(content)}
    elif kind == "result":
        obj["subtype"] = value(draw(st.sampled_from(["success", "error_during_execution"])))
        obj["is_error"] = value(draw(st.booleans()))
        obj["result"] = value("done")
        obj["usage"] = value({"input_tokens": value(3), "output_tokens": 4, "service_tier": "standard"})
        if draw(st.booleans()):
            obj["session_id"] = value("s")
    else:
        obj["rate_limit_info"] = value({"status": value(draw(st.sampled_from(["allowed", "rejected", ""])))})
    obj["uuid"] = draw(_mostly_plain)
    ascii_only = draw(st.booleans())
    line = json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 5)) == 0 and b'"uuid":"' in line:
        at = line.index(b'"uuid":"') + len(b'"uuid":"')
        line = line[:at] + b"\xff" + line[at:]  # invalid UTF-8 in a skipped string
    for key in (b'"file_path":"', b'"content":"', b'"text":"out'):
        if draw(st.integers(0, 5)) == 0 and key in line:
            # Invalid UTF-8 inside a tool input or a tool result: kept as bytes, repaired when read.
            at = line.index(key) + len(key)
            line = line[:at] + draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc3"])) + line[at:]
    return line


@st.composite
def _other_raw_event_line(draw: st.DrawFn, wrapped: bool) -> bytes:
    # The raw events around the deltas (message and block starts and stops), with each
    # field the host reads (message id, index, block type, id and name) varied: missing,
    # null, of another JSON type, past 64 bits.
    kind = draw(st.sampled_from(["message_start", "content_block_start", "content_block_stop", "message_delta",
                                 "message_stop"]))
    event: dict[str, object] = {"type": kind}
    odd = st.one_of(st.none(), _numbers, st.booleans(), st.just([]), st.just({}), st.text(max_size=3))
    if kind == "message_start":
        message: dict[str, object] = {"model": "m", "content": [], "usage": {"input_tokens": 1}}
        _maybe(draw, message, "id", draw(_usually("msg_a", st.one_of(st.just("msg_b"), odd))))
        _maybe(draw, event, "message", draw(_usually(message, odd)))
    elif kind in ("content_block_start", "content_block_stop"):
        _maybe(draw, event, "index", draw(_usually(draw(st.integers(0, 2)), odd)))
        if kind == "content_block_start":
            block: dict[str, object] = {"input": {}}
            _maybe(draw, block, "type", draw(_usually("tool_use", st.one_of(st.just("text"), odd))))
            _maybe(draw, block, "id", draw(_usually(draw(st.sampled_from(["t1", "t2", ""])), odd)))
            _maybe(draw, block, "name", draw(_usually(draw(st.sampled_from(["Read", "Bash", ""])), odd)))
            _maybe(draw, event, "content_block", draw(_usually(block, odd)))
    else:
        event["delta"] = {"stop_reason": "tool_use", "stop_sequence": None}
        event["usage"] = {"output_tokens": draw(_numbers)}
    if not wrapped:
        return json.dumps(event, separators=(",", ":")).encode()
    obj: dict[str, object] = {"type": "stream_event", "event": event, "session_id": "s", "uuid": "u"}
    if draw(st.booleans()):
        obj["api_message_id"] = draw(st.one_of(st.sampled_from(["msg_a", "msg_b", None, ""]), odd))
    return json.dumps(obj, separators=(",", ":")).encode()


# The blocks the deltas stream, so that later complete lines are checked against them.
_CONTEXT = [
    b'{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_a","content":[]}}}',
    b'{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":'
    b'{"type":"tool_use","id":"t1","name":"Read","input":{}}}}',
    b'{"type":"stream_event","event":{"type":"content_block_stop","index":1}}',
    b'{"type":"assistant","message":{"id":"msg_a","content":[{"type":"text","text":"ab"},'
    b'{"type":"thinking","thinking":"xy"}]}}',
    b'{"type":"result","subtype":"success","is_error":false}',
]


_LINES = {
    dialect: st.lists(
        st.one_of(
            _delta_line(True),
            _delta_line(False),
            _cli_delta_line(dialect == "stream-json"),
            _cli_delta_line(dialect == "stream-json"),
            st.sampled_from(_CONTEXT),
            _cli_other_line(),
            _other_raw_event_line(dialect == "stream-json"),
            _other_raw_event_line(dialect == "stream-json"),
        ),
        min_size=1,
        max_size=12,
    )
    for dialect in ("stream-json", "awp-jsonl")
}


_EDGE_LINES = [
    b'{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Read",'
    b'"input":{"limit":%s}}]}}' % number
    for number in (b"9223372036854775807", b"9223372036854775808", b"18446744073709551616", b"-9223372036854775809")
] + [
    b'{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"R","input":{"n":1e999}}]}}',
] + [
    b'{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"T",'
    b'"input":{"a":[1,{"b":2}]}}]}}',
    b'{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text",'
    b'"text":"x"}],"is_error":true}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"\\ud800"}]}}',
    b'{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":18446744073709551616}}',
    b'{"type":"result","subtype":"success","is_error":false,"uuid":"\xff","usage":{"input_tokens":1}}',
    b'{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1}}',
    b'{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"x"}]},"error":"rate_limit"}',
    # A wrapped event without its type is no delta (msgspec would not require a lone struct's tag).
    b'{"type":"stream_event","event":{"index":0,"delta":{"type":"text_delta","text":"x"}}}',
    b'{"type":"stream_event","event":{"index":0,"delta":{"type":"text_delta","text":""}}}',
]
