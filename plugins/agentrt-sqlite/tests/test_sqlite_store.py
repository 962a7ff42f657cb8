import sqlite3
from pathlib import Path

from agentrt import Plugins
from agentrt.bots import BotRecord
from agentrt.threads import ThreadRecord
from agentrt_sqlite._store import SqliteStore


async def test_threads_round_trip_and_update(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    assert await store.get_thread("t") is None
    rec = ThreadRecord(name="t", dialect="awp-jsonl", executable="/bin/a", model="m", session_id="abc:1.2-3_x")
    await store.save_thread(rec)
    assert await store.get_thread("t") == rec
    newer = ThreadRecord(name="t", dialect="stream-json", executable="/bin/b", model=None, session_id="s2")
    await store.save_thread(newer)
    assert await store.get_thread("t") == newer
    assert [s.record.name for s in await store.list_threads()] == ["t"]
    assert await store.delete_thread("t") is True
    assert await store.delete_thread("t") is False
    assert await store.get_thread("t") is None
    await store.aclose()


async def test_invalid_stored_session_id_is_never_returned_for_resume(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = SqliteStore(path)
    await store.save_thread(ThreadRecord(name="t", dialect="awp-jsonl", executable="/bin/a", session_id="ok"))
    await store.aclose()
    # Something else (an older version, a hand edit) stored a bad id.
    for bad in ("has space", "x" * 257, "semi;colon", "", "line\n", "--flag`rm`"):
        db = sqlite3.connect(path)
        db.execute("UPDATE threads SET session_id = ?", (bad,))
        db.commit()
        db.close()
        record, diag = await store.check_thread("t")
        assert record is not None and record.session_id is None
        assert diag is not None and diag.code == "invalid_resume_session_id"
        assert bad not in diag.detail or bad == ""
        assert (await store.get_thread("t")).session_id is None
    # A valid 256-character id is fine.
    await store.save_thread(ThreadRecord(name="t", dialect="d", executable="/e", session_id="a" * 256))
    assert (await store.check_thread("t"))[1] is None
    # save_thread refuses to store a bad one.
    await store.save_thread(ThreadRecord(name="t", dialect="d", executable="/e", session_id="bad id"))
    assert (await store.get_thread("t")).session_id is None
    await store.aclose()


async def test_bot_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    assert await store.get_bot("b") is None
    rec = BotRecord(bot_id="b", desired_state="running", status="starting", pid=42, restart_count=2,
                    backoff_until=12.5, last_error_code="runtime_error", config={"profile": {"k": [1]}},
                    updated_at=99.0)
    await store.save_bot(rec)
    await store.save_bot(BotRecord(bot_id="a"))
    assert await store.get_bot("b") == rec
    bots = await store.list_bots()
    assert [b.bot_id for b in bots] == ["a", "b"]
    assert bots[0].updated_at is not None  # defaulted to now
    for i in range(5):
        await store.append_timeline("b", {"type": f"e{i}", "message": "m", "payload": {"pid": i}})
    page = await store.timeline("b", offset=1, limit=2)
    assert [e["type"] for e in page] == ["e1", "e2"]
    assert page[0]["payload"] == {"pid": 1}
    await store.delete_bot("b")
    assert await store.get_bot("b") is None
    assert await store.timeline("b") == []
    await store.aclose()


def test_hooks_provide_the_stores_and_the_sink(tmp_path: Path) -> None:
    import agentrt_sqlite

    plugins = Plugins()
    plugins.register(agentrt_sqlite, name="sqlite")
    env = {"AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/h.db"}
    store = plugins.thread_store(env)
    assert isinstance(store, SqliteStore) and store.path == tmp_path / "h.db"
    assert isinstance(plugins.bot_store(env), SqliteStore)
    assert "sqlite" in plugins.sinks()
    assert not (tmp_path / "h.db").exists()  # hooks do no I/O


async def test_thread_turns_and_events_are_paged(tmp_path: Path) -> None:
    from agentrt.events import EventBatch, TextDelta, TurnCompleted, TurnStarted
    from agentrt_sqlite._recorder import ConversationInfo
    from agentrt_sqlite._sink import SqliteSink

    path = tmp_path / "p.db"
    sink = SqliteSink(path, info=ConversationInfo(thread="t"))
    seq = 0
    for turn in range(1, 4):
        for ev in (TurnStarted(turn=turn, prompt=f"p{turn}"), TextDelta(text=f"r{turn}"), TurnCompleted()):
            await sink.handle(EventBatch(source="c", first_seq=seq, mono=float(seq), wall=float(seq), events=(ev,)))
            seq += 1
    await sink.aclose()
    store = SqliteStore(path)
    assert [t["prompt"] for t in await store.thread_turns("t")] == ["p1", "p2", "p3"]
    assert [t["reply"] for t in await store.thread_turns("t", limit=1)] == ["r1"]
    seen: list[int] = []
    cursor = 0
    while True:
        page, cursor = await store.thread_events("t", after=cursor, limit=4)
        if not page:
            break
        assert len(page) <= 4
        seen.extend(e["seq"] for e in page)
    assert seen == list(range(9))
    await store.aclose()
