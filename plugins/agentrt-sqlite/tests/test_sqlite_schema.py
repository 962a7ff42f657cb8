import sqlite3
from pathlib import Path

import pytest

from agentrt.errors import AgentrtError
from agentrt_sqlite._schema import MIGRATIONS, SCHEMA_VERSION, connect


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_fresh_database_is_current_wal_normal_and_private(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "a.db"
    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert {"threads", "conversations", "turns", "events", "bots", "bot_timeline",
                "bot_state_history"} <= _tables(db)
    finally:
        db.close()
    assert path.stat().st_mode & 0o077 == 0


def test_upgrade_from_version_1_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = connect(path, target=1)
    old.execute(
        "INSERT INTO threads (name, dialect, executable, model, session_id, created_at, updated_at)"
        " VALUES ('keep', 'awp-jsonl', '/bin/agent', 'm', 'sess-1', 1, 2)"
    )
    assert old.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "bots" not in _tables(old)
    old.close()

    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert "bots" in _tables(db)
        assert db.execute("SELECT name, session_id FROM threads").fetchall() == [("keep", "sess-1")]
    finally:
        db.close()
    # Opening again is a no-op.
    connect(path).close()


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(AgentrtError) as info:
        connect(path)
    assert info.value.code == "database_too_new"


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(AgentrtError) as info:
        connect(path)
    assert info.value.code == "database_unavailable"


def test_upgrade_from_version_2_keeps_bots_and_adds_the_model_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    old = connect(path, target=2)
    old.execute("INSERT INTO bots (bot_id, desired_state, status, config) VALUES ('b1', 'running', 'stopped', '{}')")
    old.close()
    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 3
        assert db.execute("SELECT bot_id, desired_state, model FROM bots").fetchall() == [("b1", "running", None)]
    finally:
        db.close()


async def test_the_bot_store_keeps_the_model_snapshot(tmp_path: Path) -> None:
    from agentrt.bots import BotRecord
    from agentrt_sqlite._store import SqliteStore

    store = SqliteStore(tmp_path / "m.db")
    try:
        await store.save_bot(BotRecord(bot_id="b", model="gpt-x"))
        got = await store.get_bot("b")
        assert got is not None and got.model == "gpt-x"
    finally:
        await store.aclose()


async def test_upgrade_from_version_4_adds_approvals_and_keeps_turns(tmp_path: Path) -> None:
    from agentrt.approval import ApprovalDecision
    from agentrt_sqlite._store import SqliteStore

    path = tmp_path / "v4.db"
    old = connect(path, target=4)
    old.execute("INSERT INTO conversations (id, started_at, agent) VALUES ('c1', 1, 'fx')")
    old.execute("INSERT INTO turns (conversation_id, turn, prompt, reply, started_at) VALUES ('c1', 1, 'p', 'r', 1)")
    assert "approvals" not in _tables(old)
    old.close()

    store = SqliteStore(path)
    try:
        for at, decision in ((2.0, "deny"), (3.0, "allow")):
            await store.record_approval(ApprovalDecision(
                conversation_id="c1", thread=None, tool="Bash", summary="ls", decision=decision,  # type: ignore[arg-type]
                by="user", at=at,
            ))
        rows = await store.list_approvals(agent="fx")
        assert [(r["decision"], r["agent"], r["summary"]) for r in rows] == [
            ("allow", "fx", "ls"), ("deny", "fx", "ls")]
        assert await store.list_approvals(agent="other") == []
        assert [r["prompt"] for r in await store.search_logs(query="p")] == ["p"]
    finally:
        await store.aclose()
    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 5
    finally:
        db.close()


def test_many_connections_racing_to_create_one_database_all_succeed(tmp_path: Path) -> None:
    """Switching a fresh file to WAL races with another connection's migration; neither may fail."""
    import threading

    errors: list[BaseException] = []

    def open_close(path: Path, start: threading.Barrier) -> None:
        start.wait(30)
        try:
            connect(path).close()
        except BaseException as exc:  # collected: the assertion below names it
            errors.append(exc)

    for attempt in range(60):
        path = tmp_path / f"race{attempt}.db"
        start = threading.Barrier(6)
        threads = [threading.Thread(target=open_close, args=(path, start)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)  # a hang guard only
    assert errors == []
