"""A thread remembers the configured agent it talks to (schema version 7), in the real SQLite store."""

from __future__ import annotations

from pathlib import Path

from agentrt.threads import ThreadRecord
from agentrt_sqlite._schema import connect
from agentrt_sqlite._store import SqliteStore


async def test_a_thread_keeps_its_agent_when_a_front_end_that_does_not_know_it_saves_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    try:
        await store.save_thread(ThreadRecord(name="t", dialect="stream-json", executable="/bin/claude", agent="claude"))
        assert (await store.get_thread("t")) == ThreadRecord(
            name="t", dialect="stream-json", executable="/bin/claude", agent="claude")
        # agentrt chat --thread t (no agent in its record) saves the session: the agent stays.
        await store.save_thread(ThreadRecord(name="t", dialect="stream-json", executable="/bin/claude",
                                             session_id="sess-1"))
        record = await store.get_thread("t")
        assert record is not None and (record.agent, record.session_id) == ("claude", "sess-1")
        await store.save_thread(ThreadRecord(name="u", dialect="awp-jsonl", executable="/bin/agent"))
        listed = {s.record.name: s.record.agent for s in await store.list_threads()}
        assert listed == {"t": "claude", "u": None}
        assert await store.rename_thread("t", "t2")
        renamed = await store.get_thread("t2")
        assert renamed is not None and renamed.agent == "claude"
    finally:
        await store.aclose()


def test_upgrade_from_version_6_adds_no_agent_to_old_threads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = connect(path, target=6)
    old.execute("INSERT INTO threads (name, dialect, executable, created_at, updated_at)"
                " VALUES ('keep', 'awp-jsonl', '/bin/agent', 1, 2)")
    old.close()
    db = connect(path)
    try:
        assert db.execute("SELECT name, agent FROM threads").fetchall() == [("keep", None)]
    finally:
        db.close()
