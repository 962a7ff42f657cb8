"""Schema v9: the look-up of turns left running, made at every open, reads a partial index, not every turn.

Real v8 and v5 database files are built here (created at that version by
:func:`connect`, rows as agentrt wrote them then, a v8 turn's transcript
written by the recorder's own :class:`Transcript`); opening them migrates
once to v9, the index is there, ``EXPLAIN QUERY PLAN`` of the very query the
open makes shows it used (and a full scan before), and the turn a killed
agentrt left running is still closed through it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from agentrt_sqlite._schema import SCHEMA_VERSION, connect, migrate
from agentrt_sqlite._transcript import Transcript, transcript_dir
from agentrt_sqlite._unfinished import RUNNING_TURNS, close_unfinished


def _plan(db: sqlite3.Connection) -> str:
    return " | ".join(str(row[-1]) for row in db.execute("EXPLAIN QUERY PLAN " + RUNNING_TURNS))


def _statements(path: Path) -> tuple[int, list[str]]:
    """Migrate the file at ``path`` over a plain connection: the version found and the statements run."""
    db = sqlite3.connect(path, isolation_level=None)
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    try:
        return migrate(db), seen
    finally:
        db.close()


def _indexes(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'turns'"
                                     " AND name = 'turns_running'")]


def _v8(path: Path, completed: int) -> None:
    """A v8 database: ``completed`` finished turns, and one turn whose agentrt was killed mid-reply."""
    db = connect(path, target=8)
    db.execute("INSERT INTO threads (id, name, dialect, executable, created_at, updated_at)"
               " VALUES (1, 'proj', 'stream-json', '/bin/claude', 1, 1)")
    db.execute("INSERT INTO conversations (id, thread_id, dialect, started_at, transcript)"
               " VALUES ('done', 1, 'stream-json', 100, 'done.atr'), ('cut', 1, 'stream-json', 200, 'cut.atr')")
    db.executemany("INSERT INTO turns (conversation_id, turn, prompt, reply, outcome, started_at, first_seq, last_seq)"
                   " VALUES ('done', ?, 'q', 'a', 'completed', 100, 0, 1)", [(n,) for n in range(completed)])
    db.execute("INSERT INTO turns (conversation_id, turn, prompt, outcome, started_at, first_seq, tx_start)"
               " VALUES ('cut', 1, 'go on', 'running', 200, 0, 0)")
    db.close()
    # Its transcript as the recorder wrote it, then dropped (no writer holds it: its agentrt is gone).
    transcript = Transcript(transcript_dir(path) / "cut.atr", "cut", "stream-json", _fail)
    transcript.append(b"P", orjson.dumps({"process": 1, "pid": 1, "dialect": "stream-json", "replay": "events"}))
    events = [[0, 0, {"type": "turn_started", "turn": 1, "prompt": "go on"}],
              [1, 0, {"type": "text_delta", "text": "words so far", "index": 0}]]
    transcript.append(b"E", orjson.dumps({"wall": 200.0, "mono": 0.0, "events": events}))
    transcript.release()


def _fail(path: Path, exc: OSError) -> None:
    raise AssertionError(f"writing {path}: {exc}")


def test_a_v8_database_gets_the_index_once_and_the_open_check_uses_it(tmp_path: Path) -> None:
    path = tmp_path / "v8.db"
    _v8(path, completed=300)
    old = sqlite3.connect(path)
    assert old.execute("PRAGMA user_version").fetchone() == (8,)
    assert _indexes(old) == []
    assert _plan(old) == "SCAN turns"  # before: every turn ever recorded, at every open
    old.close()

    found, statements = _statements(path)
    assert found == 8
    assert [s for s in statements if s.startswith("CREATE")] == [
        "CREATE INDEX turns_running ON turns(outcome, conversation_id, first_seq) WHERE outcome = 'running'"]
    again, statements = _statements(path)
    assert again == SCHEMA_VERSION == 9
    assert [s for s in statements if "INDEX" in s or "user_version =" in s] == []  # once: nothing the second time

    db = connect(path)  # the open closes the killed turn, looking it up through the index
    try:
        assert _indexes(db) == ["turns_running"]
        assert _plan(db) == "SEARCH turns USING COVERING INDEX turns_running (outcome=?)"
        rows = db.execute("SELECT outcome, code, reply, count(*) FROM turns GROUP BY outcome").fetchall()
        assert rows == [("completed", None, "a", 300), ("failed", "turn_unfinished", "words so far", 1)]
        # The index holds running turns only: now none.
        assert db.execute("SELECT count(*) FROM turns INDEXED BY turns_running WHERE outcome = 'running'"
                          ).fetchone() == (0,)
        assert close_unfinished(db) == 0
    finally:
        db.close()


def test_a_v5_database_migrates_once_to_v9_with_the_index(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    db = connect(path, target=5)
    db.execute("INSERT INTO conversations (id, started_at) VALUES ('old', 100)")
    db.execute("INSERT INTO turns (conversation_id, turn, prompt, reply, outcome, started_at)"
               " VALUES ('old', 1, 'q', 'a', 'completed', 100), ('old', 2, 'q2', NULL, 'running', 101)")
    db.close()

    found, statements = _statements(path)
    assert found == 5
    created = [s.split(" ON ")[0] for s in statements if s.startswith("CREATE INDEX")]
    assert created.count("CREATE INDEX turns_running") == 1
    assert _statements(path) == (9, ["PRAGMA user_version"])  # opened again: read the version, nothing else

    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert _indexes(db) == ["turns_running"]
        assert "USING COVERING INDEX turns_running" in _plan(db)
        # A turn recorded before transcripts has no writer lock to test: it stays as it was, and is found by the index.
        assert db.execute(RUNNING_TURNS).fetchall() == [(2, "old", None)]
        assert db.execute("SELECT turn, outcome, reply FROM turns ORDER BY turn").fetchall() == [
            (1, "completed", "a"), (2, "running", None)]
    finally:
        db.close()
