"""ACP's decode_lines (the chunk-at-a-time host path) gives exactly the events of the plain parse and decode.

The host codec takes text ``agent_message_chunk`` notifications typed and
hands every other line to ``general``; a whole conversation (handshake
responses, agent requests, other notifications, odd lines) is read both ways,
cut into chunks anywhere, and must give the same events, the same ``raw`` and
the same lines owed to the agent.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt._line_parse import decode_objects
from agentrt.dialect import Turn
from agentrt.events import Event, TextDelta
from agentrt.lowlevel import JsonlReader, Malformed
from agentrt_acp.codec import AcpHostCodec

CAPTURES = Path(__file__).resolve().parent / "captures" / "acp"
_INIT_OK = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}'


def _codec(resume: str | None) -> AcpHostCodec:
    # A host that has written ``initialize``: the lines read next may finish the handshake.
    codec = AcpHostCodec()
    codec.start(resume=resume, model=None, cwd="/tmp/acp-lines")
    codec.encode_turn(Turn.text("hi"))
    return codec


def _read(codec: AcpHostCodec, data: bytes, cuts: list[int], *, lines: bool) -> tuple[list[Event], int, list[bytes]]:
    # As the pump does: per chunk, the events, then what the codec owes the agent.
    reader = JsonlReader()
    events: list[Event] = []
    owed: list[bytes] = []

    def general(line: bytes) -> list[Event]:
        return decode_objects(codec, [obj for obj in reader.parse(line) if type(obj) is not Malformed])

    bounds = [0, *sorted({c for c in cuts if c <= len(data)}), len(data)]
    for lo, hi in itertools.pairwise(bounds):
        if lines:
            chunk = reader.feed_lines(data[lo:hi])
            events.extend(codec.decode_lines(chunk, general) if chunk else [])
        else:
            objs = reader.feed(data[lo:hi])
            events.extend(ev for obj in objs if type(obj) is not Malformed for ev in codec.decode(obj))
        out = codec.drain_output()
        if out is not None:
            owed.append(out)
    events.extend(codec.finish())
    return events, reader.malformed_count, owed


def _same(data: bytes, cuts: list[int], resume: str | None = None) -> tuple[list[Event], list[bool]]:
    """The lines path's events and, per event, whether it was built typed (its raw still the line's bytes)."""
    fast_codec, plain_codec = _codec(resume), _codec(resume)
    fast, fast_bad, fast_owed = _read(fast_codec, data, cuts, lines=True)
    plain, plain_bad, plain_owed = _read(plain_codec, data, cuts, lines=False)
    typed = [type(ev) is TextDelta and type(ev._raw) is bytes for ev in fast]  # before raw is read below
    assert [repr(ev) for ev in fast] == [repr(ev) for ev in plain]
    assert [ev.raw for ev in fast] == [ev.raw for ev in plain]
    assert fast_bad == plain_bad
    assert fast_owed == plain_owed  # the handshake's next requests, as many and in order
    assert fast_codec.session_id == plain_codec.session_id
    assert fast_codec._requests.open == plain_codec._requests.open  # open agent requests
    return fast, typed


def _chunk(text: Any = "hi", sid: Any = "s1", kind: str = "agent_message_chunk", **extra: Any) -> bytes:
    update = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    return orjson.dumps(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}, **extra}
    )


_SESSION_NEW = b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
_SESSION_LOAD = b'{"jsonrpc":"2.0","id":1,"result":{}}'
_PERMISSION = (
    b'{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s1",'
    b'"toolCall":{"title":"Run","rawInput":{"cmd":"ls"}},"options":[{"optionId":"a","kind":"allow_once"}]}}'
)
_DEEP = (
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","x":'
    + b"[" * 1100
    + b"]" * 1100
    + b',"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"deep"}}}}'
)

# Every kind of line the typed path must leave alone, and the one it takes.
EDGES = {
    "text chunk": _chunk("hello"),
    "request/response": _SESSION_NEW,
    "agent request": _PERMISSION,
    "not an object": b'["session/update"]',
    "a number": b"3",
    "another method": b'{"jsonrpc":"2.0","method":"session/update_other","params":{"sessionId":"s1"}}',
    "another notification": b'{"jsonrpc":"2.0","method":"$/progress","params":{"update":{}}}',
    "non-text content": (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"image","mimeType":"image/png","data":"AA=="}}}}'
    ),
    "text not a string": _chunk(5),
    "empty text": _chunk(""),
    "thought chunk": _chunk("t", kind="agent_thought_chunk"),
    "tool call": (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read"}}}'
    ),
    "with a request id": _chunk("x", id=9),
    "another session": _chunk("x", sid="s2"),
    "session id not a string": _chunk("x", sid=7),
    "duplicate method": _chunk("dup")[:-1] + b',"method":"other/method"}',
    "duplicate text": _chunk("first")[:-3] + b',"text":"second"}}}}',
    "other key order": (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":{"text":"py","type":"text"},'
        b'"sessionUpdate":"agent_message_chunk"},"sessionId":"s1"}}'
    ),
    "leading space": b" " + _chunk("pad"),
    "trailing cr": _chunk("cr") + b" \r",
    "invalid utf-8": _chunk("bad")[:-2] + b',"x":"\xff"}}',
    "escaped surrogate": _chunk("x").replace(b'"text":"x"', b'"text":"\\ud800a"'),
    "infinity": _chunk("inf")[:-1] + b',"x":1e999}',
    "nested past the limit": _DEEP,
    "truncated": _chunk("cut")[:-3],
}


TYPED = {"text chunk": 2, "other key order": 2, "trailing cr": 2, "invalid utf-8": 2, "infinity": 2}
TYPED["another session"] = 1


@pytest.mark.parametrize("name", list(EDGES))
def test_decode_lines_edges(name: str) -> None:
    # Before the session opens, in the same chunk as the response that opens it, and after.
    line = EDGES[name]
    blob = b"\n".join([_INIT_OK, line, _SESSION_NEW, line]) + b"\n"
    _, typed = _same(blob, [])
    # Lines msgspec reads as the framing does are taken typed (a chunk of another session only
    # before a session is open, as decode takes it then); none of the others is.
    assert sum(typed) == TYPED.get(name, 0)


@pytest.mark.parametrize("resume", [None, "s1"], ids=["new", "load"])
def test_replayed_history_and_the_session_switch_in_one_chunk(resume: str | None) -> None:
    # While session/load replays history no chunk is reply text, and the history goes on until
    # the prompt is written (Gemini CLI replays after answering the load): "new", in the load
    # response's chunk, is still replay.  session/new switches the typed path on mid-chunk, and
    # only for that session's lines.
    opened = _SESSION_NEW if resume is None else _SESSION_LOAD
    blob = b"\n".join([_INIT_OK, _chunk("old"), opened, _chunk("new"), _chunk("x", sid="s2")]) + b"\n"
    events, _ = _same(blob, [], resume=resume)
    texts = [ev.text for ev in events if type(ev) is TextDelta]
    assert texts == (["old", "new"] if resume is None else [])


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURES.glob("*.stdout.jsonl")))
def test_decode_lines_on_real_captures(name: str) -> None:
    blob = (CAPTURES / name).read_bytes()
    _, typed = _same(blob, list(range(0, len(blob), 512)))
    if b'"agent_message_chunk"' in blob:
        assert any(typed), "the typed path was never taken"


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=3), st.just([]), st.just({}))


def _usually(value: object, other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(value), st.just(value), st.just(value), other)


@st.composite
def _chunk_like(draw: st.DrawFn) -> bytes:
    content: dict[str, Any] = {"type": draw(_usually("text", st.sampled_from(["image", "resource_link", 3])))}
    if draw(st.integers(0, 9)):
        content["text"] = draw(st.one_of(st.text(max_size=5), st.just(""), _json_leaf))
    update = {
        "sessionUpdate": draw(_usually("agent_message_chunk", st.sampled_from(["agent_thought_chunk", "plan"]))),
        "content": draw(_usually(content, _json_leaf)),
    }
    params: dict[str, Any] = {"update": draw(_usually(update, _json_leaf))}
    if draw(st.integers(0, 9)):
        params["sessionId"] = draw(_usually("s1", st.one_of(st.just("s2"), _json_leaf)))
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(_usually("session/update", st.just("session/other")))}
    obj["params"] = draw(_usually(params, _json_leaf))
    if not draw(st.integers(0, 7)):
        obj["id"] = draw(st.sampled_from([4, "4", None]))
    if draw(st.booleans()):
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    else:
        line = orjson.dumps(obj)
    mutation = draw(st.integers(0, 11))
    if mutation == 1 and line.endswith(b"}"):
        line = line[:-1] + b',"method":' + orjson.dumps(draw(st.sampled_from(["session/update", "x"]))) + b"}"
    elif mutation == 2:
        line = line + b" \r"
    elif mutation == 3:
        line = line[: draw(st.integers(0, len(line)))]  # truncated: malformed or blank
    elif mutation == 4 and line.endswith(b"}"):
        line = line[:-1] + b',"x":"\xff"}'
    return line


_OTHER_LINES = st.sampled_from(
    [_INIT_OK, _SESSION_NEW, _SESSION_LOAD, _PERMISSION, b"[1]", b'"x"', b"", b"{}", EDGES["tool call"]]
    + [EDGES["another notification"], b'{"jsonrpc":"2.0","id":7,"result":{}}', EDGES["non-text content"]]
    + [b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}', b'{"jsonrpc":"2.0","id":"r","method":"x/y"}']
)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_decode_lines_gives_the_events_of_the_plain_parse(data: st.DataObject) -> None:
    lines = data.draw(st.lists(st.one_of(_chunk_like(), _chunk_like(), _OTHER_LINES), max_size=12))
    blob = b"\n".join(lines) + b"\n"
    cuts = data.draw(st.lists(st.integers(0, len(blob)), max_size=4))
    _same(blob, cuts, resume=data.draw(st.sampled_from([None, "s1"])))
