"""Paused replays hold no descriptor: the store keeps up to eight for paging, their files closed between pages.

Each thread here is a conversation recorded the way agentrt records one: the
agent's stream-json output through the sink's raw tap (``O`` records), the
turn's own events through ``handle()``.  Its events page through a replay
(two readers of its transcript: the output, and the ``E`` records beside it).
With eight replays paused mid-thread, ``/proc/self/fd`` counts no more
descriptors than before the first page; each resumes where it stopped (the
pages together are the whole replay, event for event).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentrt import get_plugins
from agentrt.events import EventBatch, TurnCompleted, TurnStarted
from agentrt.lowlevel import TapInfo
from agentrt_sqlite._reading import ThreadEvents
from agentrt_sqlite._recorder import ConversationInfo
from agentrt_sqlite._sink import SqliteSink
from agentrt_sqlite._store import SqliteStore

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc/self/fd")

WORDS = 30


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _delta(text: str) -> bytes:
    return orjson.dumps({"type": "stream_event", "session_id": "s", "uuid": text, "event": {
        "type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}}) + b"\n"


async def _record(path: Path, thread: str) -> None:
    """One conversation of ``thread``: a turn of ``WORDS`` text deltas, tapped and indexed."""
    sink = SqliteSink(path, info=ConversationInfo(thread=thread, dialect="stream-json"))
    conversation = f"conv-{thread}"
    codec = get_plugins().dialect("stream-json").host_codec()
    try:
        tap = sink.open_tap(TapInfo(conversation_id=conversation, dialect="stream-json", process=1, pid=1))
        assert tap is not None
        await sink.handle(EventBatch(source=conversation, first_seq=0, mono=0.0, wall=1.0,
                                     events=(TurnStarted(turn=1, prompt="go"),)))
        tap.agent_input(b'{"prompt": "go"}\n')
        seq = 1
        for n in range(WORDS):
            chunk = _delta(f"{thread} word {n} ")
            tap.agent_output(chunk)
            events = tuple(codec.decode(orjson.loads(chunk)))
            await sink.handle(EventBatch(source=conversation, first_seq=seq, mono=0.0, wall=1.0, events=events))
            seq += len(events)
        await sink.handle(EventBatch(source=conversation, first_seq=seq, mono=0.0, wall=1.0,
                                     events=(TurnCompleted(),)))
        tap.close()
    finally:
        await sink.aclose()


async def test_eight_paused_replays_hold_no_descriptor_and_each_resumes_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "agentrt.db"
    threads = [f"t{n}" for n in range(ThreadEvents.KEPT)]
    for name in threads:
        await _record(path, name)
    store = SqliteStore(path)
    try:
        whole: dict[str, list[dict[str, Any]]] = {}
        for name in threads:  # each read in one page: nothing kept
            whole[name], _ = await store.thread_events(name, limit=10_000)
            texts = [e["event"].get("text") for e in whole[name] if e["event"]["type"] == "text_delta"]
            assert texts == [f"{name} word {n} " for n in range(WORDS)]
        before = _fds()

        pages: dict[str, list[dict[str, Any]]] = {}
        cursors: dict[str, int] = {}
        for name in threads:  # eight replays, each paused after its first page
            pages[name], cursors[name] = await store.thread_events(name, limit=5)
            assert cursors[name] == 5
        assert _fds() - before == set(), "a paused replay holds a descriptor"

        for _ in range(3):  # each resumed in turn, the others paused meanwhile
            for name in threads:
                page, cursors[name] = await store.thread_events(name, after=cursors[name], limit=5)
                pages[name] += page
            assert _fds() - before == set()
        for name in threads:  # the rest, each page continuing the same replay
            while True:
                page, cursors[name] = await store.thread_events(name, after=cursors[name], limit=7)
                if not page:
                    break
                pages[name] += page
            assert pages[name] == whole[name]
        assert _fds() - before == set()
    finally:
        await store.aclose()


async def test_a_paused_replay_whose_transcript_was_removed_ends_quietly(tmp_path: Path) -> None:
    path = tmp_path / "agentrt.db"
    await _record(path, "gone")
    store = SqliteStore(path)
    try:
        page, cursor = await store.thread_events("gone", limit=3)
        assert len(page) == 3
        (tmp_path / "transcripts" / "conv-gone.atr").unlink()
        rest, _ = await store.thread_events("gone", after=cursor, limit=1000)
        # No error; no more text: at most the next E event the replay already held in memory.
        assert [e["event"]["type"] for e in rest] in ([], ["turn_completed"])
    finally:
        await store.aclose()
