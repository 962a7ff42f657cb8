"""Both sinks over the events the stream-json codec decodes from real Claude Code captures."""

import io
import sqlite3
from pathlib import Path

import orjson
import pytest

from agentrt import Plugins
from agentrt.events import EventBatch, TurnStarted, to_json
from agentrt_sqlite.api import SqliteSink, read_events
from agentrt_tui.api import TuiSink

from ..plugin_data import CLAUDE_CODE_CAPTURES

# Recorded from the real CLI by the record.py beside them.
CAPTURES = CLAUDE_CODE_CAPTURES


def _batches(name: str) -> list[EventBatch]:
    plugins = Plugins(autoload=True)
    codec = plugins.dialect("stream-json").host_codec()
    out = [EventBatch(source=name, first_seq=0, mono=0.0, wall=0.0,
                      events=(TurnStarted(turn=1, prompt="capture"),))]
    seq = 1
    path = CAPTURES / f"{name}.stdout.jsonl"
    for i, line in enumerate(path.read_bytes().splitlines()):
        if not line.strip():
            continue
        events = tuple(codec.decode(orjson.loads(line)))
        if events:
            out.append(EventBatch(source=name, first_seq=seq, mono=0.1 * (i + 1), wall=0.0, events=events))
            seq += len(events)
    return out


async def _plain(name: str) -> str:
    buf = io.StringIO()
    sink = TuiSink(buf)
    for batch in _batches(name):
        await sink.handle(batch)
    await sink.aclose()
    return buf.getvalue()


async def test_tui_shows_retries_and_the_api_error_in_plain_words() -> None:
    out = await _plain("http_500")
    assert "\x1b" not in out
    assert "[API error 500, retrying (attempt 1 of 2)]" in out
    assert "[API error 500, retrying (attempt 2 of 2)]" in out
    assert "error: API Error: 500 Internal server error" in out and "[api_error_500]" in out


async def test_tui_shows_the_tool_and_the_reply() -> None:
    out = await _plain("tool_use_allowed")
    # The issue's own example: the tool call and its result on lines of their own, the blocks apart.
    assert out.startswith("I will run a command.\n● Bash: echo hi\n  ⎿ hi\nThe tool said: hi\n(20 in · 10 out")


@pytest.mark.parametrize("name", ["basic_two_turns", "partial_messages_two_turns", "tool_use_allowed_partial",
                                  "http_500", "resume"])
async def test_sqlite_stores_every_decoded_event(tmp_path: Path, name: str) -> None:
    batches = _batches(name)
    sink = SqliteSink(tmp_path / "c.db")
    for batch in batches:
        await sink.handle(batch)
    await sink.aclose()
    db = sqlite3.connect(tmp_path / "c.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        outcome = db.execute("SELECT outcome FROM turns").fetchall()
    finally:
        db.close()
    rows = read_events(tmp_path / "c.db")
    events = [ev for b in batches for ev in b.events]
    assert [r["seq"] for r in rows] == list(range(len(events)))
    for row, ev in zip(rows, events):
        assert row["event"]["type"] == ev.type
        assert row["event"] == orjson.loads(orjson.dumps(to_json(ev)))
    assert outcome == [("failed",)] if name == "http_500" else [("completed",)]
