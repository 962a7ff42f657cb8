"""The synchronous half of the database sink: index notes in, rows out.

A :class:`Recorder` is owned by exactly one thread (the sink's writer).  The
events themselves are in the conversation's transcript (see
:mod:`agentrt_sqlite._transcript`); the recorder keeps only the index: the
``conversations`` and ``turns`` rows (with the turn's capped reply, usage,
outcome and its offsets into the transcript), session ids and the bot rows.
No row per event.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import attrs
import orjson

from agentrt.events import (
    Event,
    Lifecycle,
    ProcessExited,
    SessionStarted,
    StateChanged,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)

__all__ = ["DERIVING", "REPLY_LIMIT", "ConversationInfo", "Note", "Recorder"]

#: How many characters of a turn's reply the ``turns`` row keeps (and indexes
#: for search): 64 Ki.  The whole reply is always in the transcript; a longer
#: one is read back from there by replay (``reply_clipped``), so a session of
#: any length costs the recorder at most this much per open turn.  Measured:
#: at 1 Mi characters the recorded run's peak RSS was 1.42x the unrecorded
#: one's (the reply, its copies on the way into SQLite and FTS5's indexing of
#: it), at 64 Ki 1.08x.
REPLY_LIMIT = 1 << 16

#: The event kinds that derive index rows.
DERIVING = (TurnStarted, TurnCompleted, TurnFailed, SessionStarted, ProcessExited, Lifecycle, StateChanged)


@attrs.frozen(kw_only=True)
class ConversationInfo:
    """What the sink knows about the conversations it records (from its options)."""

    thread: str | None = None
    dialect: str | None = None
    executable: str | None = None
    model: str | None = None
    agent: str | None = None
    """The configured agent's name (``-a NAME``), for ``agentrt logs -a``."""
    continues: str | None = None
    """The id of the conversation this one continues (``run -c``)."""


@attrs.frozen
class Note:
    """What one batch adds to the index.

    ``items`` are ``(seq, event, extra)`` for the deriving events: ``extra``
    is ``tx_start`` for a ``TurnStarted``; ``(reply, clipped, tx_end)`` for a
    terminal event.  ``size`` is the reply text's length (the sink bounds its
    queue by it).
    """

    source: str
    transcript: str | None
    mono: float
    wall: float
    items: list[tuple[int, Event, Any]]
    size: int = 0


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """``text``, or a copy with each lone surrogate as U+FFFD when it has any.

    SQLite text is UTF-8, which cannot hold a lone surrogate; the transcript
    keeps the exact bytes, the ``turns`` row a legible text.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


@attrs.define
class _Turn:
    row: int
    mono: float


class Recorder:
    """Writes groups of notes, one transaction per group."""

    def __init__(self, db: sqlite3.Connection, info: ConversationInfo) -> None:
        self.db = db
        self.info = info
        self._known: set[str] = set()
        self._turns: dict[str, _Turn] = {}
        self._thread_id: int | None = None
        if info.thread is not None:
            self._thread_id = self._ensure_thread(info.thread)

    def _ensure_thread(self, name: str) -> int:
        now = time.time()
        self.db.execute(
            "INSERT INTO threads (name, dialect, executable, model, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO NOTHING",
            (name, self.info.dialect or "", self.info.executable or "", self.info.model, now, now),
        )
        row = self.db.execute("SELECT id FROM threads WHERE name = ?", (name,)).fetchone()
        return int(row[0])

    def write(self, notes: Sequence[Note]) -> int:
        """Store the notes in one transaction; returns how many index items were written."""
        db = self.db
        count = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for note in notes:
                if note.source not in self._known:
                    self._conversation(note.source, note.transcript, note.wall)
                for seq, event, extra in note.items:
                    self._derive(note.source, seq, event, extra, note)
                count += len(note.items)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return count

    def _derive(self, source: str, seq: int, event: Event, extra: Any, note: Note) -> None:
        db = self.db
        if isinstance(event, TurnStarted):
            self._turn_started(source, seq, event, extra, note)
        elif isinstance(event, (TurnCompleted, TurnFailed)):
            self._turn_ended(source, seq, event, extra, note)
        elif isinstance(event, SessionStarted):
            self._session(source, event.session_id, event.model)
        elif isinstance(event, ProcessExited):
            db.execute(
                "UPDATE conversations SET ended_at = ?, returncode = ?, signal = ? WHERE id = ?",
                (note.wall, event.returncode, event.signal, source),
            )
        elif isinstance(event, Lifecycle):
            self._lifecycle(source, event, note.wall)
        elif isinstance(event, StateChanged):
            db.execute(
                "INSERT INTO bot_state_history (bot_id, state, previous, reason, at) VALUES (?, ?, ?, ?, ?)",
                (source, event.state, event.previous, event.reason, note.wall),
            )

    def _conversation(self, source: str, transcript: str | None, wall: float) -> None:
        info = self.info
        self.db.execute(
            "INSERT INTO conversations (id, thread_id, dialect, executable, model, started_at, agent, continues,"
            " transcript) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET"
            " transcript = COALESCE(conversations.transcript, excluded.transcript)",
            (source, self._thread_id, info.dialect, info.executable, info.model, wall, info.agent, info.continues,
             transcript),
        )
        self._known.add(source)

    def _session(self, source: str, session_id: str, model: str | None) -> None:
        self.db.execute(
            "UPDATE conversations SET session_id = ?, model = COALESCE(?, model) WHERE id = ?",
            (session_id, model, source),
        )
        if self._thread_id is not None:
            # The thread resumes from the latest id its agent reported.
            self.db.execute(
                "UPDATE threads SET session_id = ?, model = COALESCE(?, model), updated_at = ?"
                " WHERE id = ?",
                (session_id, model, time.time(), self._thread_id),
            )

    def _turn_started(self, source: str, seq: int, event: TurnStarted, tx_start: Any, note: Note) -> None:
        cur = self.db.execute(
            "INSERT INTO turns (conversation_id, turn, prompt, started_at, first_seq, tx_start)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (source, event.turn, storable(event.prompt), note.wall, seq, tx_start),
        )
        assert cur.lastrowid is not None
        self._turns[source] = _Turn(row=cur.lastrowid, mono=note.mono)

    def _turn_ended(
        self, source: str, seq: int, event: TurnCompleted | TurnFailed, extra: Any, note: Note
    ) -> None:
        turn = self._turns.pop(source, None)
        if turn is None:
            return  # a terminal event without a recorded start: the transcript has it
        reply, clipped, tx_end = extra
        usage = event.usage or Usage()
        message = None
        if isinstance(event, TurnCompleted):
            outcome, code = "completed", None
            reply = reply or (event.result or "")
            if event.session_id:
                self._session(source, event.session_id, None)
        else:
            outcome, code, message = "failed", event.code, storable(event.message)
        self.db.execute(
            "UPDATE turns SET outcome = ?, code = ?, message = ?, reply = ?, input_tokens = ?, output_tokens = ?,"
            " cache_read_input_tokens = ?, cache_creation_input_tokens = ?, duration = ?, last_seq = ?,"
            " reply_clipped = ?, tx_end = ? WHERE id = ?",
            (
                outcome, code, message, storable(reply), usage.input_tokens, usage.output_tokens,
                usage.cache_read_input_tokens, usage.cache_creation_input_tokens,
                max(0.0, note.mono - turn.mono), seq, int(clipped), tx_end, turn.row,
            ),
        )

    def _lifecycle(self, source: str, event: Lifecycle, wall: float) -> None:
        payload = {
            "agentId": event.agent_id,
            "data": dict(event.data),
            "pid": event.pid,
            "timestamp": event.timestamp,
        }
        self.db.execute(
            "INSERT INTO bot_timeline (bot_id, type, message, payload, at) VALUES (?, ?, ?, ?, ?)",
            (source, event.kind, event.message, orjson.dumps(payload, default=str).decode(), wall),
        )
