import sqlite3
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
import trio

from agentrt.errors import AgentrtError
from agentrt.events import (
    EventBatch,
    Lifecycle,
    ProcessExited,
    SessionStarted,
    StateChanged,
    TextDelta,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
    to_json,
)
from agentrt.sinks import Sink
from agentrt.testing import check_sink, sample_events
from agentrt_sqlite._recorder import ConversationInfo
from agentrt_sqlite._sink import SqliteSink, make_sink


def _rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def _events(path: Path) -> list[tuple[str, int, str, dict]]:
    """Every recorded event, conversation by conversation: the transcripts replayed."""
    from agentrt_sqlite._reading import conversation_events

    db = sqlite3.connect(path)
    try:
        out = []
        for (cid,) in db.execute("SELECT id FROM conversations ORDER BY started_at, rowid").fetchall():
            out.extend((env["source"], env["seq"], env["event"]["type"], env["event"])
                       for env in conversation_events(db, cid))
        return out
    finally:
        db.close()


def _batch(source: str, seq: int, *events, mono: float = 0.0) -> EventBatch:
    return EventBatch(source=source, first_seq=seq, mono=mono, wall=1000.0 + seq, events=tuple(events))


async def test_conformance(tmp_path: Path) -> None:
    counter = iter(range(1000))
    paths: dict[int, Path] = {}

    def factory() -> SqliteSink:
        sink = SqliteSink(tmp_path / f"c{next(counter)}.db")
        paths[id(sink)] = sink.path
        return sink

    async def observe(sink: Sink) -> Sequence[tuple[str, int]]:
        path = paths[id(sink)]
        return [(source, seq) for source, seq, _, _ in await trio.to_thread.run_sync(_events, path)]

    await check_sink(factory, observe=observe)


async def test_every_event_is_stored_as_its_json_form(tmp_path: Path) -> None:
    from agentrt.events import ThinkingDelta, ToolResult

    sink = SqliteSink(tmp_path / "a.db")
    events = [*sample_events(), ToolResult(tool_use_id="t2", content="plain ✓ \"text\"\n"),
              ThinkingDelta(text="a\tb", index=3), TextDelta(text="", index=2)]
    await sink.handle(_batch("conv-1", 0, *events))
    await sink.aclose()
    rows = _events(sink.path)
    assert [r[1] for r in rows] == list(range(len(events)))
    for (_, _, kind, data), ev in zip(rows, events):
        assert kind == ev.type
        if kind != "x_third_party":
            assert data == orjson.loads(orjson.dumps(to_json(ev)))
    third = next(r for r in rows if r[2] == "x_third_party")
    assert third[3] == {"type": "x_third_party", "payload": {"anything": ["goes", 1]}}


async def test_turns_conversations_and_thread_are_derived(tmp_path: Path) -> None:
    info = ConversationInfo(thread="work", dialect="awp-jsonl", executable="/bin/agent", model="m1")
    sink = SqliteSink(tmp_path / "a.db", info=info)
    await sink.handle(_batch("conv-1", 0, SessionStarted(session_id="s-1", model="m2"),
                             TurnStarted(turn=1, prompt="hi"), mono=10.0))
    await sink.handle(_batch("conv-1", 2, TextDelta(text="hel"), TextDelta(text="lo"), mono=10.5))
    await sink.handle(_batch("conv-1", 4, TurnCompleted(session_id="s-2",
                             usage=Usage(input_tokens=12, output_tokens=2)), mono=11.25))
    await sink.handle(_batch("conv-1", 5, TurnStarted(turn=2, prompt="again"), mono=12.0))
    await sink.handle(_batch("conv-1", 6, TurnFailed(code="turn_cancelled"), mono=12.5))
    await sink.handle(_batch("conv-1", 7, ProcessExited(returncode=0, requested=True), mono=13.0))
    await sink.aclose()
    turns = _rows(sink.path, "SELECT turn, prompt, reply, outcome, code, input_tokens, output_tokens, duration"
                             " FROM turns ORDER BY id")
    assert turns == [(1, "hi", "hello", "completed", None, 12, 2, 1.25),
                     (2, "again", "", "failed", "turn_cancelled", None, None, 0.5)]
    conv = _rows(sink.path, "SELECT session_id, model, returncode, dialect FROM conversations")
    assert conv == [("s-2", "m2", 0, "awp-jsonl")]
    assert _rows(sink.path, "SELECT name, session_id, model, executable FROM threads") == [
        ("work", "s-2", "m2", "/bin/agent")]


async def test_bot_lifecycle_goes_to_timeline_and_state_history(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "a.db")
    await sink.handle(_batch("bot-1", 0, Lifecycle(kind="qr_code", message="scan", pid=7, data={"url": "u"},
                                                   agent_id="bot-1"),
                             StateChanged(state="running", previous="starting", reason="steady")))
    await sink.aclose()
    from agentrt_sqlite._store import SqliteStore

    store = SqliteStore(sink.path)
    timeline = await store.timeline("bot-1")
    assert [(t["type"], t["message"], t["payload"]) for t in timeline] == [
        ("qr_code", "scan", {"agentId": "bot-1", "data": {"url": "u"}, "pid": 7, "timestamp": None})]
    history = await store.state_history("bot-1")
    assert [(h["state"], h["previous"], h["reason"]) for h in history] == [("running", "starting", "steady")]
    await store.aclose()


async def test_backpressure_blocks_but_never_drops(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "a.db", max_pending=5, flush_interval=0.001)
    for i in range(400):
        await sink.handle(_batch("c", i * 4, TurnStarted(turn=i + 1, prompt=f"p{i}"), TextDelta(text="a"),
                                 TextDelta(text="b"), TurnCompleted()))
    await sink.flush()
    assert sink.committed == 800  # every turn's start and end in the index
    await sink.aclose()
    assert [r[1] for r in _events(sink.path)] == list(range(1600))
    assert _rows(sink.path, "SELECT count(*), min(reply), max(reply) FROM turns WHERE outcome = 'completed'") == [
        (400, "ab", "ab")]


async def test_flush_makes_events_visible_to_readers_while_open(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "a.db")
    await sink.handle(_batch("c", 0, TurnStarted(turn=1, prompt="p"), TextDelta(text="x")))
    await sink.flush()
    assert _rows(sink.path, "SELECT prompt FROM turns") == [("p",)]
    assert [r[2] for r in _events(sink.path)] == ["turn_started", "text_delta"]
    await sink.aclose()


async def test_unusable_database_fails_loudly_once_then_drops_quietly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    sink = SqliteSink(blocker / "sub" / "a.db")
    with pytest.raises(AgentrtError) as info:
        with trio.fail_after(10):
            await sink.handle(_batch("c", 0, TextDelta(text="x")))
    # One recorder_failed naming the file (the transcript or the database: whichever is
    # written first) and why; the runtime detaches the sink on it.
    assert info.value.code == "recorder_failed"
    named = {repr(str(blocker / "sub" / "transcripts" / "c.atr")), repr(str(blocker / "sub" / "a.db"))}
    assert any(n in info.value.detail for n in named) and "Not a directory" in info.value.detail
    await sink.handle(_batch("c", 1, TextDelta(text="y")))  # given up: later calls drop quietly
    await sink.flush()
    await sink.aclose()
    await sink.aclose()  # idempotent


async def test_handle_after_close_is_an_error(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "a.db")
    await sink.aclose()
    with pytest.raises(AgentrtError) as info:
        await sink.handle(_batch("c", 0, TextDelta(text="x")))
    assert info.value.code == "sink_closed"


def test_factory_options(tmp_path: Path) -> None:
    sink = make_sink({"url": f"sqlite://{tmp_path}/f.db", "thread": "t", "max_pending": 9})
    assert sink.path == tmp_path / "f.db"
    assert sink.info.thread == "t" and sink.max_pending == 9
    assert sink.policy == "block"
    with pytest.raises(AgentrtError) as info:
        make_sink({"env": {"AGENTRT_DATABASE_URL": "postgres://u:p@h/db"}})
    assert info.value.code == "unsupported_database_url"


async def test_lone_surrogates_and_huge_ints_are_kept_exactly(tmp_path: Path) -> None:

    from agentrt.events import RawEvent, Status, ThinkingDelta, ToolResult

    sink = SqliteSink(tmp_path / "a.db")
    events = (TextDelta(text="half an emoji \ud83d"), ThinkingDelta(text="ok"),
              ToolResult(tool_use_id="t", content="x\udc00y", is_error=True),
              RawEvent(name="big \ud800", raw={"n": 1}), TextDelta(text="fine"),
              Status(kind="x", detail={"n": 2**70}))
    await sink.handle(_batch("c", 0, *events))
    await sink.aclose()
    rows = _events(sink.path)
    assert [r[1] for r in rows] == [0, 1, 2, 3, 4, 5]
    got = [r[3] for r in rows]
    assert got[0] == {"type": "text_delta", "text": "half an emoji \ud83d", "index": 0}
    assert got[2] == {"type": "tool_result", "tool_use_id": "t", "content": "x\udc00y", "is_error": True}
    assert got[3] == {"type": "raw", "name": "big \ud800"}
    assert got[4]["text"] == "fine"
    assert got[5] == {"type": "status", "kind": "x", "label": "", "detail": {"n": 2**70}}


async def test_writer_thread_runs_at_lower_priority_on_linux(tmp_path: Path) -> None:
    import os
    import sys

    sink = SqliteSink(tmp_path / "a.db", writer_nice=7)
    await sink.handle(_batch("c", 0, TextDelta(text="x")))
    await sink.flush()
    if sys.platform == "linux":
        assert sink.writer_tid is not None and sink.writer_tid != os.getpid()
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())
        assert os.getpriority(os.PRIO_PROCESS, sink.writer_tid) == min(19, base + 7)
        assert os.getpriority(os.PRIO_PROCESS, os.getpid()) == base  # the trio thread is untouched
    await sink.aclose()


async def test_two_sinks_share_one_file_and_removing_a_live_thread_is_harmless(tmp_path: Path) -> None:
    from agentrt_sqlite._store import SqliteStore

    path = tmp_path / "shared.db"
    a = SqliteSink(path, info=ConversationInfo(thread="a"), flush_interval=0.001)
    b = SqliteSink(path, info=ConversationInfo(thread="b"), flush_interval=0.001)
    store = SqliteStore(path)

    async def feed(sink: SqliteSink, source: str) -> None:
        await sink.handle(_batch(source, 0, TurnStarted(turn=1, prompt="p")))
        for i in range(1, 301):
            await sink.handle(_batch(source, i, TextDelta(text=f"{i} ")))
            if i == 150:
                await sink.flush()
        await sink.handle(_batch(source, 301, TurnCompleted()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(feed, a, "conv-a")
        nursery.start_soon(feed, b, "conv-b")
    await a.flush()
    assert await store.delete_thread("a") is True  # while sink a is still open
    await a.handle(_batch("conv-a", 302, TextDelta(text="after removal")))
    await a.aclose()
    await b.aclose()
    await store.aclose()
    # The thread's rows and transcript are gone; what sink a wrote after went to a fresh transcript no row names.
    assert _rows(path, "SELECT id FROM conversations") == [("conv-b",)]
    assert [r[1] for r in _events(path)] == list(range(302))
    assert _rows(path, "SELECT reply FROM turns t JOIN conversations c ON t.conversation_id = c.id"
                       " WHERE c.id = 'conv-b'") == [("".join(f"{i} " for i in range(1, 301)),)]


async def test_a_lone_surrogate_in_a_prompt_or_reply_does_not_fail_the_recording(tmp_path: Path) -> None:
    """SQLite text cannot hold it: the turn row gets U+FFFD, the transcript keeps the exact text."""
    path = tmp_path / "s.db"
    sink = SqliteSink(path, flush_interval=0.001)
    await sink.handle(EventBatch(source="c", first_seq=0, mono=0.0, wall=0.0, events=(
        TurnStarted(turn=1, prompt="ask \udc00"), TextDelta(text="half \ud83d"), TextDelta(text=" more"),
        TurnCompleted())))
    await sink.aclose()
    assert _rows(path, "SELECT prompt, reply, outcome FROM turns") == [("ask \ufffd", "half \ufffd more", "completed")]
    texts = [r[3].get("text") for r in _events(path)]
    assert texts[1:3] == ["half \ud83d", " more"]
