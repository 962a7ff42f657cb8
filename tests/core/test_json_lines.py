"""``run --json``'s batch encoder (``lines_parts``) writes every event as the plain per-event encoder does.

The batch path formats text deltas around their encoded text and writes an
unread tool payload through from its own buffer (a string ``msgspec.Raw``
checked for UTF-8 only, msgspec having validated the rest while decoding the
line).  Each line must be byte for byte what ``event_line`` gives for a
freshly decoded copy of the event, and — where the agent spelled its JSON as
orjson does, as Claude Code's ``JSON.stringify`` does — what
``orjson.dumps(to_json(event))`` gives for the event decoded the general way
(every value parsed).  Checked on the repository's Claude Code captures, the
bench corpus, and lines built to be tricky: non-ASCII, lone surrogate escapes,
control characters, invalid UTF-8 in a payload, huge deltas and payloads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentrt._eventjson import event_line, lines_parts
from agentrt._json.lazy_fields import JsonFragment, stored_getter
from agentrt._line_parse import decode_objects
from agentrt._plugins import Plugins
from agentrt.events import TextDelta, ToolResult, ToolUse, to_json
from agentrt.lowlevel import JsonlReader

from ..plugin_data import CLAUDE_CODE_CAPTURES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "bench" / "corpus.py"
CAPTURES = sorted(CLAUDE_CODE_CAPTURES.glob("*.stdout.jsonl"))
_PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "stream-json"})


def _typed_batches(blob: bytes, chunk: int = 1 << 18) -> list[list[Any]]:
    """The events of ``blob`` as the pump decodes stream-json: typed, per bulk read, payloads unread."""
    codec = _PLUGINS.dialect("stream-json").host_codec()
    reader = JsonlReader()

    def general(line: bytes) -> Any:
        return decode_objects(codec, reader.parse(line))

    return [
        list(codec.decode_lines(reader.feed_lines(blob[start : start + chunk]), general))
        for start in range(0, len(blob), chunk)
    ]


def _general(blob: bytes) -> list[Any]:
    """The events of ``blob`` decoded from parsed objects (no fragment kept)."""
    codec = _PLUGINS.dialect("stream-json").host_codec()
    return [ev for obj in JsonlReader().feed(blob) for ev in codec.decode(obj)]


def _unread_payloads(events: list[Any]) -> int:
    getters = {ToolUse: stored_getter(ToolUse, "input"), ToolResult: stored_getter(ToolResult, "content")}
    return sum(1 for ev in events if type(ev) in getters and type(getters[type(ev)](ev, type(ev))) is JsonFragment)


def _check(blob: bytes, *, canonical: bool = True) -> list[Any]:
    """The batch lines of ``blob`` against the per-event encoder; returns the typed events."""
    batches = _typed_batches(blob)
    fast = b"".join(b"".join(lines_parts(batch)) for batch in batches)
    # The plain per-event encoder, on a copy decoded the same way (its payloads unread too).
    per_event = b"".join(event_line(ev) for batch in _typed_batches(blob) for ev in batch)
    assert fast == per_event
    reference = [orjson.dumps(to_json(ev)) + b"\n" for ev in _general(blob)]
    lines = fast.splitlines(keepends=True)
    assert len(lines) == len(reference)
    for line, expected in zip(lines, reference, strict=True):
        assert orjson.loads(line) == orjson.loads(expected)
        assert json.loads(line.decode("utf-8")) == json.loads(expected)
    if canonical:
        assert lines == reference
    return [ev for batch in batches for ev in batch]


def test_the_repositorys_claude_code_captures_are_found() -> None:
    assert CAPTURES, f"no *.stdout.jsonl in {CLAUDE_CODE_CAPTURES}"


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_capture_is_written_as_the_per_event_encoder_writes_it(capture: Path) -> None:
    _check(capture.read_bytes())


def test_the_bench_corpus_is_written_as_the_per_event_encoder_writes_it() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_corpus", CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # With its 1 MB lines: payloads past the 64 KiB pieces of the UTF-8 check.
    blob = b"".join(line for _, line in module.corpus_lines(5001, big_lines=True))
    events = _check(blob)
    written_through = _unread_payloads(events)
    assert written_through > 100  # the payloads went the fast way, not parsed
    assert sum(type(ev) is TextDelta for ev in events) > 1000


_SESSION = '"session_id":"5b0f6c1e-8a3b-4a8e-9a53-2f1d3c0b7e11"'


def _delta(text: str, index: int = 0) -> bytes:
    event = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}
    body = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f'{{"type":"stream_event","event":{body},"parent_tool_use_id":null,{_SESSION}}}\n'.encode()


def _result(content: bytes) -> bytes:
    return (
        b'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result",'
        b'"content":' + content + b',"is_error":false}]},"parent_tool_use_id":null,' + _SESSION.encode() + b"}\n"
    )


def _use(tool_input: bytes) -> bytes:
    return (
        b'{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"m",'
        b'"content":[{"type":"tool_use","id":"toolu_2","name":"Edit","input":' + tool_input + b"}],"
        b'"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null,'
        + _SESSION.encode()
        + b"}\n"
    )


def _spelled(text: str) -> bytes:
    return json.dumps(text, ensure_ascii=False).encode()


HUGE = 'é🙂 ≤ 漢字 \\ " \t\n' * 60_000  # ~1.2 MB, multi-byte characters across every 64 KiB cut

TRICKY = {
    "non_ascii": [
        _delta("café → 漢字 🙂"),
        _result(_spelled("Größe ✓ 🚀 …")),
        _use(b'{"old_string":"na\xc3\xafve \xe2\x89\xa4"}'),
    ],
    "control_characters": [
        _delta("a\x00b\x1f\x7f\u2028\u2029 \t\r\n"),
        _result(_spelled("bell \x07 esc \x1b nul \x00 del \x7f")),
        _use(json.dumps({"cmd": "printf '\x01\x02'"}, ensure_ascii=False, separators=(",", ":")).encode()),
    ],
    "lone_surrogate_escapes": [
        _delta("x").replace(b'"text":"x"', b'"text":"git \\ud83d status"'),
        _result(b'"lone \\udc00 low"'),
        _use(b'{"k\\ud800":"v"}'),
    ],
    "invalid_utf8_payload": [_result(b'"ls \xff -l"'), _result(b'"cut \xc3"'), _use(b'{"a":"\xed\xa0\x80"}')],
    "non_canonical_spelling": [_result(b'"caf\\u00e9 \\/ slash"'), _use(b'{"a": 1}'), _use(b'{"n":1e3,"a":1,"a":2}')],
    "huge": [
        _delta(HUGE),
        _result(_spelled(HUGE)),
        _use(json.dumps({"new_string": HUGE}, ensure_ascii=False).encode()),
    ],
    "many_deltas_between_payloads": [
        line for i in range(300) for line in (_delta(f"δ{i} "), _delta("\\", index=i % 3), _result(_spelled(f"r{i} ü")))
    ],
}
# Spelled otherwise than orjson would (escapes, whitespace, a duplicate key): the same value, other bytes.
NOT_CANONICAL = {"non_canonical_spelling"}


@pytest.mark.parametrize("name", list(TRICKY))
def test_tricky_lines_are_written_as_the_per_event_encoder_writes_them(name: str) -> None:
    events = _check(b"".join(TRICKY[name]), canonical=name not in NOT_CANONICAL)
    assert events


def test_a_string_payload_with_invalid_utf8_in_a_raw_is_parsed_not_written_through() -> None:
    # msgspec cuts the Raw without checking its UTF-8: the check still runs, and the
    # line carries the value the framing's parse gives (U+FFFD), valid UTF-8.
    blob = _result(b'"ls \xff -l"')
    events = _check(blob)
    assert _unread_payloads(events) == 0
    line = b"".join(lines_parts(_typed_batches(blob)[0]))
    assert b"\xff" not in line and "\ufffd".encode() in line
    line.decode("utf-8")


def test_a_valid_string_payload_in_a_raw_is_written_through_unread() -> None:
    import msgspec

    blob = _result(_spelled('Größe ✓ 🚀 \\ " \x00'))
    (batch,) = _typed_batches(blob)
    (event,) = [ev for ev in batch if type(ev) is ToolResult]
    stored = stored_getter(ToolResult, "content")(event, ToolResult)
    assert type(stored) is JsonFragment and type(stored.data) is msgspec.Raw
    parts = lines_parts(batch)
    assert any(part is stored.data for part in parts)  # its own buffer, never copied before the join
    assert b"".join(parts) == b"".join(orjson.dumps(to_json(ev)) + b"\n" for ev in _general(blob))
