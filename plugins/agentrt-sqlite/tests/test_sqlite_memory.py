"""The recorder's memory stays bounded however long the session, and nothing is lost."""

import sqlite3
import tracemalloc
from pathlib import Path

import trio

from agentrt.events import EventBatch, TextDelta, ToolResult, TurnCompleted, TurnStarted
from agentrt_sqlite._recorder import ConversationInfo
from agentrt_sqlite._schema import SCHEMA_VERSION, connect
from agentrt_sqlite._sink import SqliteSink
from agentrt_sqlite._store import SqliteStore

KIB = 1024
MIB = 1024 * KIB


def _rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def _delta(i: int) -> TextDelta:
    # 4 KiB of distinct words per delta, so the reply is searchable and checkable.
    return TextDelta(text=f"w{i:06d} " + "x" * (4 * KIB - 9) + " ")


async def _long_session(sink: SqliteSink, batches: int, per_batch: int = 64) -> int:
    """A 1-turn session of ``batches * per_batch`` text deltas plus a tool result per batch."""
    seq = 0

    async def send(*events: object) -> None:
        nonlocal seq
        await sink.handle(EventBatch(source="long", first_seq=seq, mono=float(seq), wall=1000.0, events=events))
        seq += len(events)

    await send(TurnStarted(turn=1, prompt="go on"))
    for b in range(batches):
        deltas = [_delta(b * per_batch + i) for i in range(per_batch)]
        await send(*deltas, ToolResult(tool_use_id=f"t{b}", content="r" * (32 * KIB)))
    await send(TurnCompleted())
    await sink.aclose()
    return seq


async def test_a_long_session_is_recorded_in_bounded_memory_and_whole(tmp_path: Path) -> None:
    path = tmp_path / "long.db"
    sink = SqliteSink(path, info=ConversationInfo(thread="long"), max_pending_bytes=256 * KIB,
                      reply_limit=64 * KIB, flush_interval=0.001)
    batches = 96  # 24 MiB of reply text and 3 MiB of tool results
    tracemalloc.start()
    try:
        with trio.fail_after(120):
            events = await _long_session(sink, batches)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    reply_bytes = batches * 64 * 4 * KIB
    # Held at once: the writer's queue and the group it writes (each about
    # max_pending_bytes and a batch), the reply prefix, the events in flight.
    # Holding the reply, or the session, would take tens of MiB.
    assert peak < 4 * MIB, f"peak {peak / MIB:.1f} MiB for a {reply_bytes / MIB:.0f} MiB reply"
    assert sink.committed == 2  # the index: the turn's start and end, no row per event
    from agentrt_sqlite._reading import conversation_events

    db = sqlite3.connect(path)
    try:
        assert [env["seq"] for env in conversation_events(db, "long")] == list(range(events))
    finally:
        db.close()
    turns = _rows(path, "SELECT length(reply), reply_clipped, first_seq, last_seq FROM turns")
    assert turns == [(64 * KIB, 1, 0, events - 1)]
    # Readers get the whole reply back from the transcript.
    expected = "".join(_delta(i).text for i in range(batches * 64))
    store = SqliteStore(path)
    try:
        [turn] = await store.thread_turns("long")
        assert turn["reply"] == expected
        [logged] = await store.search_logs(query="w000003")  # within the indexed prefix
        assert logged["reply"] == expected and "reply_clipped" not in logged
        assert await store.search_logs(query="w006000") == []  # beyond it: not indexed
    finally:
        await store.aclose()


async def test_a_reply_within_the_limit_is_stored_whole_and_not_clipped(tmp_path: Path) -> None:
    path = tmp_path / "short.db"
    sink = SqliteSink(path, reply_limit=8 * KIB, flush_interval=0.001)
    await _long_session(sink, batches=1, per_batch=2)
    assert _rows(path, "SELECT length(reply), reply_clipped FROM turns") == [(8 * KIB, 0)]


async def test_a_reply_one_character_over_the_limit_keeps_exactly_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "edge.db"
    sink = SqliteSink(path, reply_limit=8 * KIB - 1, flush_interval=0.001)
    await _long_session(sink, batches=1, per_batch=2)
    [(reply, clipped)] = _rows(path, "SELECT reply, reply_clipped FROM turns")
    assert clipped == 1 and reply == (_delta(0).text + _delta(1).text)[: 8 * KIB - 1]


async def test_the_queue_is_bounded_in_bytes_not_only_in_notes(tmp_path: Path) -> None:
    """A few turns with big replies fill the index queue long before ``max_pending`` notes would."""
    sink = SqliteSink(tmp_path / "q.db", max_pending_bytes=64 * KIB, flush_interval=0.001)
    seen: list[int] = []
    with trio.fail_after(60):
        for i in range(40):
            await sink.handle(EventBatch(source="q", first_seq=3 * i, mono=0.0, wall=0.0, events=(
                TurnStarted(turn=i + 1, prompt="p"), TextDelta(text="r" * (48 * KIB)), TurnCompleted())))
            seen.append(sink._pending_bytes)
        await sink.aclose()
    # handle() returns with at most the bound plus the batch just queued waiting.
    assert max(seen) < 64 * KIB + 48 * KIB
    assert sink.committed == 80
    assert _rows(tmp_path / "q.db", "SELECT count(*), min(length(reply)) FROM turns") == [(40, 48 * KIB)]


def test_upgrade_from_version_5_keeps_turns_unclipped(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    old = connect(path, target=5)
    old.execute("INSERT INTO conversations (id, started_at) VALUES ('c1', 1)")
    old.execute("INSERT INTO turns (conversation_id, turn, prompt, reply, started_at) VALUES ('c1', 1, 'p', 'r', 1)")
    old.close()
    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 6
        assert db.execute("SELECT reply, reply_clipped, first_seq, last_seq FROM turns").fetchall() == [
            ("r", 0, None, None)]
    finally:
        db.close()
