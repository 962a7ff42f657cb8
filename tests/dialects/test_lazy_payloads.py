"""Tool inputs and tool results kept as bytes by stream-json's typed path, parsed on first read.

Whatever the bytes, an event holding a fragment must be the event of the plain
parse: equal, same repr, same JSON form, same pickle, and read once.
"""

from __future__ import annotations

import pickle
from typing import Any

import attrs
import orjson
import pytest

from agentrt._eventjson import event_line
from agentrt._json import lazy_fields as _lazyjson
from agentrt._line_parse import decode_objects
from agentrt._plugins import Plugins
from agentrt.dialect import JsonFragment
from agentrt.events import Diagnostic, ToolResult, ToolUse, from_json, to_json
from agentrt.lowlevel import JsonlReader, Malformed, parse_fragment

PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl,stream-json"})


def _tool_use(tool_input: bytes, name: bytes = b"Bash") -> bytes:
    return (
        b'{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"%s","input":%s}]},'
        b'"uuid":"u"}' % (name, tool_input)
    )


def _tool_result(content: bytes) -> bytes:
    return (
        b'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t","type":"tool_result",'
        b'"content":%s,"is_error":false}]},"uuid":"u"}' % content
    )


# Values orjson reads differently from msgspec or refuses, inside the kept fragment.
_VALUES = [
    b'{"command":"ls\xff -l","file_path":"a\xed\xa0\x80.py"}',  # invalid UTF-8 (a UTF-8-encoded surrogate too)
    b'{"command":"git \\ud83d status"}',  # a lone surrogate escape: JavaScript's slice() of an emoji
    b'{"command":"ls","limit":18446744073709551616}',  # past 64 bits: a double, as JSON.parse reads it
    b'{"command":"ls","n":-9223372036854775809,"m":18446744073709551615}',
    b'{"command":"ls","x":1e999}',
    b'{"command":["ls"],"cmd":"pwd","nested":{"a":[1,{"b":null}]}}',
    b'{"comm\xffand":"x","command":"rm"}',  # an invalid key beside the one the label reads
    b'{"command":"a","command":"b"}',  # a duplicate key: the last one wins everywhere
    b'["not", "an", "object"]',
    b'"text"',
    b"null",
    b"{}",
]


def _decode_lines(codec: Any, blob: bytes) -> list[Any]:
    # As the pump reads a codec that decodes whole chunks: its lines unparsed to
    # decode_lines, the lines it does not take through the framing and decode.
    reader = JsonlReader()
    return codec.decode_lines(reader.feed_lines(blob), lambda line: decode_objects(codec, reader.parse(line)))


def _events(line: bytes, typed: bool) -> list[Any]:
    # typed: the host path (decode_lines, typed parse first); else the plain parse and decode.
    codec = PLUGINS.dialect("stream-json").host_codec()
    if typed:
        events = _decode_lines(codec, line + b"\n")
        assert not any(type(ev) is Diagnostic for ev in events)
        return events
    objs = JsonlReader().feed(line + b"\n")
    assert objs and not any(type(obj) is Malformed for obj in objs)
    return [ev for obj in objs for ev in codec.decode(obj)]


def _same(typed: list[Any], plain: list[Any]) -> None:
    assert typed == plain
    assert [repr(ev) for ev in typed] == [repr(ev) for ev in plain]
    assert [to_json(ev) for ev in typed] == [to_json(ev) for ev in plain]
    assert [event_line(ev) for ev in typed] == [event_line(ev) for ev in plain]
    assert [ev.raw for ev in typed] == [ev.raw for ev in plain]


@pytest.mark.parametrize("value", _VALUES, ids=range(len(_VALUES)))
@pytest.mark.parametrize("kind", ["tool_input", "tool_result"])
def test_a_kept_fragment_reads_as_the_plain_parse(kind: str, value: bytes) -> None:
    line = _tool_use(value) if kind == "tool_input" else _tool_result(value)
    typed = _events(line, typed=True)
    plain = _events(line, typed=False)
    assert [type(ev) for ev in typed] == [ToolUse if kind == "tool_input" else ToolResult]
    _same(typed, plain)
    # Every event can be encoded by every sink, whatever bytes the agent wrote.
    orjson.dumps([to_json(ev) for ev in typed])


def test_the_typed_path_keeps_the_payload_unparsed_until_read_then_parses_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[bytes] = []

    def counting(data: Any) -> Any:
        calls.append(bytes(data))
        return parse_fragment(data)

    monkeypatch.setattr(_lazyjson, "parse_fragment", counting)
    big = b'"' + b"x" * 100_000 + b'"'
    (result,) = _events(_tool_result(big), typed=True)
    (use,) = _events(_tool_use(b'{"file_path":"a.py","content":' + big + b"}", name=b"Write"), typed=True)
    assert calls == []  # nothing of either payload built yet (the label read its one key apart)
    assert use.summary == "Writing a.py"
    content = result.content
    assert content == "x" * 100_000 and len(calls) == 1
    assert result.content is content and repr(result) and result == result
    assert len(calls) == 1  # read twice, compared, printed: parsed once
    tool_input = use.input
    assert tool_input["content"] == "x" * 100_000 and use.input is tool_input
    assert to_json(use)["input"] == tool_input and len(calls) == 2


def test_an_event_holding_a_fragment_is_the_event_of_its_value() -> None:
    fragment = b'{"file_path":"src/a\xff.py","n":18446744073709551616}'
    value = {"file_path": "src/a\ufffd.py", "n": 18446744073709551616.0}

    def lazy() -> ToolUse:
        return ToolUse(id="t", name="Read", input=JsonFragment(fragment, mapping=True), summary="Reading a.py")

    plain = ToolUse(id="t", name="Read", input=value, summary="Reading a.py")
    assert lazy() == plain and repr(lazy()) == repr(plain)
    assert pickle.loads(pickle.dumps(lazy())) == plain
    assert attrs.evolve(lazy(), name="Edit") == attrs.evolve(plain, name="Edit")
    assert attrs.asdict(lazy()) == attrs.asdict(plain)
    assert from_json(to_json(lazy())) == plain
    assert event_line(lazy()) == event_line(plain)
    # What the dialects make of an absent value, and of a tool input that is not an object.
    assert ToolResult(tool_use_id="t", content=JsonFragment(b"")).content is None
    assert ToolUse(id="t", name="n", input=JsonFragment(b"[1]", mapping=True)).input == {}
    assert ToolResult(tool_use_id="t", content=JsonFragment(b"[1]")).content == [1]
    # The constructor takes plain values as before.
    assert ToolUse(id="t", name="n", input={"a": 1}).input == {"a": 1}


@pytest.mark.parametrize("dialect", ["stream-json", "awp-jsonl"])
@pytest.mark.parametrize(
    "head",
    [
        b'{"type":"assistant","message":{"content":[]},"x":',
        b'{"type":"user","message":{"content":[]},"x":',
        b'{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}},"x":',
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"x":',
    ],
)
def test_a_too_deeply_nested_line_is_malformed_not_a_crash(dialect: str, head: bytes) -> None:
    # msgspec raises RecursionError (not a DecodeError) past its nesting limit; the
    # line then takes the framing's lenient path like any line orjson refuses.
    line = head + b"[" * 3000 + b"]" * 3000 + b"}\n"
    codec = PLUGINS.dialect(dialect).host_codec()
    events = _decode_lines(codec, line + b'{"type":"result","subtype":"success"}\n')
    # The line is a malformed-line diagnostic, and the next line is still read.
    assert [ev.type for ev in events] == ["diagnostic", "turn_completed"]
    assert events[0].code == "malformed_output_line"


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"user","message":{"role":"user","content":[{}]},"uuid":"p"}',
        b'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t","content":"x"}]}}',
        b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"x"}]}}',
    ],
)
def test_a_user_block_without_the_tool_result_type_is_no_tool_result(line: bytes) -> None:
    # msgspec does not require the tag of a lone tagged struct: the block's type is a plain field.
    assert _events(line, typed=True) == _events(line, typed=False)
    assert [ev.type for ev in _events(line, typed=True)] == ["raw"]


@pytest.mark.parametrize("value", _VALUES, ids=range(len(_VALUES)))
def test_a_kept_tool_input_reads_its_keys_as_the_parsed_mapping(value: bytes) -> None:
    # What a label reads of a kept input (get, [], iteration) is what the plain parse's mapping holds.
    import msgspec

    from agentrt_stream_json._typed import ToolArgs

    args = ToolArgs(msgspec.Raw(value))
    plain = JsonlReader().parse(b'{"v":' + value + b"}")[0]["v"]
    plain = plain if type(plain) is dict else {}
    assert dict(args) == plain and len(args) == len(plain)
    for key in ("command", "cmd", "file_path", "absent"):
        assert args.get(key) == plain.get(key)
        assert args.get(key, "default") == plain.get(key, "default")
        assert (key in args) == (key in plain)
