"""A database of schema v5 (rows per event) opens at the current version, once, and its history still reads.

Its old conversations keep their ``events`` rows (read from there); a new
conversation of the same thread is a transcript; a thread's events are both,
in order, and the old turns stay searchable.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from agentrt.events import EventBatch, TextDelta, TurnCompleted, TurnStarted
from agentrt_sqlite._recorder import ConversationInfo
from agentrt_sqlite._schema import SCHEMA_VERSION, connect
from agentrt_sqlite._sink import SqliteSink
from agentrt_sqlite._store import SqliteStore


def _v5(path: Path) -> None:
    """A v5 database as agentrt wrote it then: a thread, a conversation, its turn and its events as rows."""
    db = connect(path, target=5)
    db.execute("INSERT INTO threads (id, name, dialect, executable, session_id, created_at, updated_at)"
               " VALUES (1, 'proj', 'stream-json', '/bin/claude', 'native-1', 1, 1)")
    db.execute("INSERT INTO conversations (id, thread_id, dialect, session_id, started_at, ended_at)"
               " VALUES ('old', 1, 'stream-json', 'native-1', 100, 101)")
    db.execute("INSERT INTO turns (conversation_id, turn, prompt, reply, outcome, started_at)"
               " VALUES ('old', 1, 'old question', 'old answer', 'completed', 100)")
    for seq, event in enumerate([{"type": "turn_started", "turn": 1, "prompt": "old question"},
                                 {"type": "text_delta", "text": "old answer", "index": 0},
                                 {"type": "turn_completed", "result": "old answer"}]):
        db.execute("INSERT INTO events (source, seq, mono, wall, type, data) VALUES ('old', ?, ?, ?, ?, ?)",
                   (seq, float(seq), 100.0 + seq, event["type"], json.dumps(event)))
    db.close()


async def test_a_v5_database_migrates_once_and_its_history_reads_beside_new_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "agentrt.db"
    _v5(path)
    store = SqliteStore(path)
    try:
        # Old history reads as before.
        page, cursor = await store.thread_events("proj")
        assert [(e["source"], e["seq"], e["event"]["type"]) for e in page] == [
            ("old", 0, "turn_started"), ("old", 1, "text_delta"), ("old", 2, "turn_completed")]
        assert (await store.thread_events("proj", after=cursor))[0] == []
        [logged] = await store.search_logs(query="question")
        assert logged["reply"] == "old answer"
        record = await store.get_thread("proj")
        assert record is not None and record.session_id == "native-1"  # resume keeps working
    finally:
        await store.aclose()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 9
    assert db.execute("SELECT transcript FROM conversations").fetchall() == [(None,)]
    db.close()

    # A new conversation of the thread: a transcript, no event rows.
    sink = SqliteSink(path, info=ConversationInfo(thread="proj", dialect="stream-json"))
    await sink.handle(EventBatch(source="new", first_seq=0, mono=0.0, wall=200.0, events=(
        TurnStarted(turn=1, prompt="new question"), TextDelta(text="new answer"), TurnCompleted())))
    await sink.aclose()
    store = SqliteStore(path)
    try:
        page, _ = await store.thread_events("proj", limit=4)
        more, _ = await store.thread_events("proj", after=4)
        assert [(e["source"], e["seq"]) for e in page + more] == [
            ("old", 0), ("old", 1), ("old", 2), ("new", 0), ("new", 1), ("new", 2)]
        assert [t["reply"] for t in await store.thread_turns("proj")] == ["old answer", "new answer"]
        assert [r["prompt"] for r in await store.search_logs(query="question")] == ["new question", "old question"]
    finally:
        await store.aclose()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM events").fetchone() == (3,)  # the old rows, nothing added
    assert db.execute("SELECT id, transcript FROM conversations ORDER BY started_at").fetchall() == [
        ("old", None), ("new", "new.atr")]
    db.close()


async def test_a_failed_turn_keeps_its_message_in_the_index(tmp_path: Path) -> None:
    from agentrt.events import TurnFailed

    path = tmp_path / "agentrt.db"
    _v5(path)
    sink = SqliteSink(path, info=ConversationInfo(thread="proj", dialect="stream-json"))
    await sink.handle(EventBatch(source="new", first_seq=0, mono=0.0, wall=200.0, events=(
        TurnStarted(turn=1, prompt="q"), TurnFailed(code="api_error_500", message="the API said 500 \ud800"))))
    await sink.aclose()
    store = SqliteStore(path)
    try:
        turns = await store.thread_turns("proj")
    finally:
        await store.aclose()
    # The web UI shows it from here; a turn recorded before v8 has none (its event has it).
    assert [(t["code"], t["message"]) for t in turns] == [(None, None), ("api_error_500", "the API said 500 \ufffd")]
