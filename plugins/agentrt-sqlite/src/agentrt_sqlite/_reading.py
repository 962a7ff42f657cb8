"""Reading recorded events back: a conversation's transcript replayed, or its ``events`` rows from before v8.

Synchronous, over one connection (the store runs these in its worker thread).
Conversations recorded since schema v8 name their transcript
(``conversations.transcript``); older ones keep their rows in ``events`` and
are read from there, unchanged.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import orjson

from ._replay import replay
from ._transcript import OpenFiles, transcript_dir

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\.atr")

__all__ = ["ThreadEvents", "conversation_events", "read_events", "database_file", "transcript_of", "turn_texts"]


def database_file(db: sqlite3.Connection) -> Path:
    """The file of ``db``'s main database."""
    for _seq, name, file in db.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return Path(file)
    raise ValueError("no main database")


def transcript_of(db: sqlite3.Connection, conversation_id: str) -> Path | None:
    """The transcript file of a conversation (``None``: recorded before transcripts, or unknown)."""
    row = db.execute("SELECT transcript FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    if row is None or not isinstance(row[0], str) or not _NAME.fullmatch(row[0]):
        return None  # none, or not a name this recorder writes (never a path out of the directory)
    return transcript_dir(database_file(db)) / row[0]


def conversation_events(
    db: sqlite3.Connection, conversation_id: str, *, end: int | None = None, files: OpenFiles | None = None
) -> Iterator[dict[str, Any]]:
    """A conversation's event envelopes in order: its transcript replayed, else its ``events`` rows.

    A transcript that is missing (removed by hand) gives nothing.  ``files``:
    see :func:`~agentrt_sqlite._replay.replay`.
    """
    path = transcript_of(db, conversation_id)
    if path is not None:
        if path.exists():
            yield from replay(path, conversation_id, end=end, files=files)
        return
    last = -1
    while True:  # pages by id, so a long conversation never sits in memory at once
        rows = db.execute(
            "SELECT id, seq, mono, wall, data FROM events WHERE source = ? AND id > ? ORDER BY id LIMIT 1000",
            (conversation_id, last),
        ).fetchall()
        if not rows:
            return
        for rowid, seq, mono, wall, data in rows:
            yield {"source": conversation_id, "seq": seq, "mono": mono, "wall": wall, "event": orjson.loads(data)}
            last = rowid


def turn_texts(
    db: sqlite3.Connection, conversation_id: str, first_seq: int, last_seq: int | None, tx_end: int | None
) -> Iterator[str]:
    """The text deltas of the turn whose events are ``first_seq`` to ``last_seq``, in order."""
    stop = last_seq if last_seq is not None else 1 << 62
    for env in conversation_events(db, conversation_id, end=tx_end):
        seq = env["seq"]
        if seq is None or seq <= first_seq:
            continue
        if seq >= stop:
            return
        event = env["event"]
        if event.get("type") == "text_delta":
            yield str(event.get("text", ""))


def read_events(database: Path, conversation_id: str | None = None) -> list[dict[str, Any]]:
    """The recorded event envelopes of one conversation, or of every one (oldest first), from the file at ``database``.

    Blocking: a tool's or a test's reader.  Each conversation's events are its
    transcript replayed (or its ``events`` rows, recorded before transcripts).
    """
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        ids = [conversation_id] if conversation_id is not None else [
            r[0] for r in db.execute("SELECT id FROM conversations ORDER BY started_at, rowid").fetchall()]
        return [env for cid in ids for env in conversation_events(db, cid)]
    finally:
        db.close()


class ThreadEvents:
    """Pages of a thread's events, in order, each page going on where the last one stopped.

    The cursor is the number of events handed out so far.  A page whose
    cursor is the one the last page returned continues the same replay; any
    other cursor replays from the start and skips (correct, slower).  Up to
    :data:`KEPT` replays are kept paused between pages, and a paused one holds
    no descriptor: its transcript files are closed at the end of each page and
    reopened at the offsets reached when the next page resumes it.
    """

    #: How many paused replays are kept (a few readers at once: web pages, an export).
    KEPT = 8

    def __init__(self) -> None:
        self._streams: dict[tuple[str, int], tuple[Generator[dict[str, Any], None, None], OpenFiles]] = {}

    def page(self, db: sqlite3.Connection, name: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Up to ``limit`` envelopes after ``after``, and the next cursor."""
        after = max(0, int(after))
        kept = self._streams.pop((name, after), None)
        if kept is None:
            files = OpenFiles()
            stream = _thread_stream(db, name, files)
            for _ in range(after):
                if next(stream, None) is None:
                    return [], after
        else:
            stream, files = kept
        out: list[dict[str, Any]] = []
        for env in stream:
            out.append(env)
            if len(out) >= limit:
                break
        cursor = after + len(out)
        if len(out) >= limit:
            files.close()  # paused: its readers reopen their files when resumed
            while len(self._streams) >= self.KEPT:
                old, _ = self._streams.pop(next(iter(self._streams)))
                old.close()
            self._streams[(name, cursor)] = (stream, files)
        else:
            stream.close()
        return out, cursor


def _thread_stream(db: sqlite3.Connection, name: str, files: OpenFiles) -> Generator[dict[str, Any], None, None]:
    ids = [r[0] for r in db.execute(
        "SELECT c.id FROM conversations c JOIN threads t ON c.thread_id = t.id WHERE t.name = ?"
        " ORDER BY c.started_at, c.rowid", (name,),
    ).fetchall()]
    for cid in ids:
        yield from conversation_events(db, cid, files=files)
