"""The synchronous half of the database sink: batches in, rows out.

A :class:`Recorder` is owned by exactly one thread (the sink's writer).  It
writes every event envelope to ``events`` and derives the ``conversations``,
``turns`` and bot rows from the events as they pass, so readers never have to
replay the event log.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import attrs
import orjson

from agentrt.events import (
    Event,
    EventBatch,
    Lifecycle,
    ProcessExited,
    SessionStarted,
    StateChanged,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)

from ._encode import encode_event

__all__ = ["REPLY_LIMIT", "Recorder", "ConversationInfo", "Prepared", "prepare"]

# Every event row takes the same nine values, so rows keep their arrival order
# whatever their kind.  Kind 0: the JSON form, encoded in Python (orjson),
# arrives as UTF-8 bytes that CAST stores as TEXT without a decode.  Kinds 1 and
# 2 (text and thinking deltas, string tool results: most events and most bytes)
# let SQLite build the JSON: the escaping then runs inside sqlite3_step, which
# releases the GIL, so the host path's thread keeps running meanwhile.  The
# result is the same JSON form.
_ROW = (
    "(?{0}, ?{1}, ?{2}, ?{3}, ?{4}, CASE ?{5}"
    " WHEN 0 THEN CAST(?{6} AS TEXT)"
    " WHEN 1 THEN json_object('type', ?{4}, 'text', ?{6}, 'index', ?{7})"
    " ELSE json_object('type', ?{4}, 'tool_use_id', ?{7}, 'content', ?{6}, 'is_error', json(?{8})) END)"
)
_WIDTH = 9
#: Rows per INSERT statement.  Each statement is one sqlite3_step, so one GIL
#: release and re-acquire for this many rows instead of one per row: with the
#: trio thread busy (a web page per browser, say), re-acquiring the GIL is what
#: the writer waits on.  Measured: 256 rows per statement wrote 100k rows in
#: 0.65 of executemany's time with another thread busy, 0.84 with none.
_MAX_ROWS = 256
#: A row whose payload is longer than this (characters or bytes) is inserted alone.
_BIG_PAYLOAD = 2048


@functools.cache
def _insert_sql(rows: int) -> str:
    values = ",".join(_ROW.format(*range(r * _WIDTH + 1, r * _WIDTH + _WIDTH + 1)) for r in range(rows))
    return "INSERT INTO events (source, seq, mono, wall, type, data) VALUES " + values


def _insert_rows(db: sqlite3.Connection, flat: list[Any], big: Sequence[int] = ()) -> None:
    """Insert the rows whose values ``flat`` holds end to end, in order.

    Statements of :data:`_MAX_ROWS` rows, then powers of two for the rest, so
    only a few distinct statements ever exist (the connection caches them).
    ``big`` lists (ascending) the rows with a large payload: each goes in alone,
    since a multi-row statement copies its values once more (measured slower
    for payloads of kilobytes).
    """
    # An SQLite built with a low variable limit (999 before 3.32) gets smaller statements.
    most = max(1, min(_MAX_ROWS, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // _WIDTH))
    row = 0
    for stop in (*big, len(flat) // _WIDTH):
        left = stop - row
        pos = row * _WIDTH
        while left:
            rows = most if left >= most else 1 << (left.bit_length() - 1)
            end = pos + rows * _WIDTH
            db.execute(_insert_sql(rows), flat[pos:end])
            pos = end
            left -= rows
        if stop * _WIDTH < len(flat):  # the big row itself
            db.execute(_insert_sql(1), flat[pos : pos + _WIDTH])
        row = stop + 1


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


@attrs.define
class _Turn:
    row: int
    mono: float
    reply: list[str] = attrs.Factory(list)
    size: int = 0  # characters in ``reply``
    clipped: bool = False


#: Events that derive rows besides their own: ``prepare`` keeps these whole.
_DERIVING = (TurnStarted, TurnCompleted, TurnFailed, SessionStarted, ProcessExited, Lifecycle, StateChanged)

#: How many characters of a turn's reply the ``turns`` row keeps (and indexes
#: for search).  The whole reply is always in ``events``; a longer one is read
#: back from there (``reply_clipped``), so a session of any length costs the
#: recorder at most this much per open turn.
REPLY_LIMIT = 1 << 20


@attrs.frozen
class Prepared:
    """A batch as the writer takes it: every event already reduced to row values.

    Each item is ``(type, how, a, b, c, event)``: ``how`` 1 (``a`` the text,
    ``b`` the index) or 2 (``a`` the content, ``b`` the tool-use id, ``c`` the
    error flag as JSON) let SQLite build the JSON form; ``how`` 0 has it in
    ``a`` as UTF-8 bytes.  ``event`` is kept only for the kinds that derive
    rows (turns, sessions, exits, bot state).  ``size`` is the payloads'
    length in characters or bytes: the sink bounds its queue by it.
    """

    source: str
    first_seq: int
    mono: float
    wall: float
    items: list[tuple[Any, ...]]
    size: int


def prepare(batch: EventBatch) -> Prepared:
    """Reduce every event of ``batch`` to plain row values.

    Runs on the trio thread, in ``handle()``.  Deltas and string tool results
    become a tuple of their fields; other events are encoded to their JSON form
    here rather than in the writer.  Either way the event, and the decoded JSON
    behind it (``raw``), can be freed right away instead of waiting in the
    writer's queue (where it would also survive into older GC generations,
    which measurably slowed the host path), and the queue's size in bytes is
    known.  Encoding costs the same CPU on either thread: both hold the GIL.
    """
    items: list[tuple[Any, ...]] = []
    append = items.append
    size = 0
    for event in batch.events:
        cls = type(event)
        e: Any = event  # exact-class checks; mypy does not narrow on them
        if cls is TextDelta:
            text = e.text
            append(("text_delta", 1, text, e.index, None, None))
            size += len(text)
        elif cls is ThinkingDelta:
            text = e.text
            append(("thinking_delta", 1, text, e.index, None, None))
            size += len(text)
        elif cls is ToolResult and type(e.content) is str:
            text = e.content
            append(("tool_result", 2, text, e.tool_use_id, "true" if e.is_error else "false", None))
            size += len(text)
        else:
            data = encode_event(event)
            append((event.type, 0, data, None, None, event if isinstance(event, _DERIVING) else None))
            size += len(data)
    return Prepared(batch.source, batch.first_seq, batch.mono, batch.wall, items, size)


def _ascii_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    source, seq, mono, wall, kind, how, a, b, c = row
    if how == 0:
        return row
    if how == 1:
        data: dict[str, Any] = {"type": kind, "text": a, "index": b}
    else:
        data = {"type": kind, "tool_use_id": b, "content": a, "is_error": c == "true"}
    return (source, seq, mono, wall, kind, 0, json.dumps(data, ensure_ascii=True).encode(), None, None)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _storable(text: str) -> str:
    """``text``, or a copy with each lone surrogate as U+FFFD when it has any.

    SQLite text is UTF-8, which cannot hold a lone surrogate; the events keep
    the exact text (as ASCII JSON escapes), the ``turns`` row a legible one.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class Recorder:
    """Writes groups of batches, one transaction per group."""

    def __init__(self, db: sqlite3.Connection, info: ConversationInfo, *, reply_limit: int = REPLY_LIMIT) -> None:
        self.db = db
        self.info = info
        self.reply_limit = reply_limit
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

    def write(self, batches: Sequence[Prepared]) -> int:
        """Store the prepared batches in one transaction; returns how many events were written."""
        db = self.db
        flat: list[Any] = []  # the rows' values end to end (see _insert_rows)
        extend = flat.extend
        big: list[int] = []  # row numbers of large payloads
        turns = self._turns
        db.execute("BEGIN IMMEDIATE")
        try:
            for batch in batches:
                source = batch.source
                if source not in self._known:
                    self._conversation(source, batch.wall)
                seq = batch.first_seq
                mono, wall = batch.mono, batch.wall
                for kind, how, a, b, c, event in batch.items:
                    if len(a) > _BIG_PAYLOAD:
                        big.append(len(flat) // _WIDTH)
                    extend((source, seq, mono, wall, kind, how, a, b, c))
                    if kind == "text_delta":
                        turn = turns.get(source)
                        if turn is not None:
                            self._reply(turn, a)
                    elif event is not None:
                        self._derive(source, seq, event, batch)
                    seq += 1
            db.execute("SAVEPOINT event_rows")
            try:
                _insert_rows(db, flat, big)
            except UnicodeEncodeError:
                # A lone surrogate cannot be bound as UTF-8: store those rows as
                # ASCII JSON (\\udXXXX escapes), which keeps the text exactly.
                db.execute("ROLLBACK TO event_rows")
                ascii_flat: list[Any] = []
                for start in range(0, len(flat), _WIDTH):
                    ascii_flat.extend(_ascii_row(tuple(flat[start : start + _WIDTH])))
                _insert_rows(db, ascii_flat, big)
            db.execute("RELEASE event_rows")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return len(flat) // _WIDTH

    def _reply(self, turn: _Turn, text: str) -> None:
        if turn.clipped:
            return
        room = self.reply_limit - turn.size
        if len(text) > room:
            # Keep a prefix only: the rest stays in ``events`` (see REPLY_LIMIT).
            text = text[: max(room, 0)]
            turn.clipped = True
        turn.reply.append(text)
        turn.size += len(text)

    def _derive(self, source: str, seq: int, event: Event, batch: Prepared) -> None:
        # Only the rarer event kinds derive rows; deltas are just logged.
        db = self.db
        if isinstance(event, TurnStarted):
            self._turn_started(source, seq, event, batch)
        elif isinstance(event, (TurnCompleted, TurnFailed)):
            self._turn_ended(source, seq, event, batch)
        elif isinstance(event, SessionStarted):
            self._session(source, event.session_id, event.model)
        elif isinstance(event, ProcessExited):
            db.execute(
                "UPDATE conversations SET ended_at = ?, returncode = ?, signal = ? WHERE id = ?",
                (batch.wall, event.returncode, event.signal, source),
            )
        elif isinstance(event, Lifecycle):
            self._lifecycle(source, event, batch.wall)
        elif isinstance(event, StateChanged):
            db.execute(
                "INSERT INTO bot_state_history (bot_id, state, previous, reason, at) VALUES (?, ?, ?, ?, ?)",
                (source, event.state, event.previous, event.reason, batch.wall),
            )

    def _conversation(self, source: str, wall: float) -> None:
        info = self.info
        self.db.execute(
            "INSERT INTO conversations (id, thread_id, dialect, executable, model, started_at, agent, continues)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
            (source, self._thread_id, info.dialect, info.executable, info.model, wall, info.agent, info.continues),
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

    def _turn_started(self, source: str, seq: int, event: TurnStarted, batch: Prepared) -> None:
        cur = self.db.execute(
            "INSERT INTO turns (conversation_id, turn, prompt, started_at, first_seq) VALUES (?, ?, ?, ?, ?)",
            (source, event.turn, _storable(event.prompt), batch.wall, seq),
        )
        assert cur.lastrowid is not None
        self._turns[source] = _Turn(row=cur.lastrowid, mono=batch.mono)

    def _turn_ended(self, source: str, seq: int, event: TurnCompleted | TurnFailed, batch: Prepared) -> None:
        turn = self._turns.pop(source, None)
        if turn is None:
            return  # a terminal event without a recorded start: the events table has it
        usage = event.usage or Usage()
        if isinstance(event, TurnCompleted):
            outcome, code = "completed", None
            reply = "".join(turn.reply) or (event.result or "")
            if event.session_id:
                self._session(source, event.session_id, None)
        else:
            outcome, code = "failed", event.code
            reply = "".join(turn.reply)
        reply = _storable(reply)
        self.db.execute(
            "UPDATE turns SET outcome = ?, code = ?, reply = ?, input_tokens = ?, output_tokens = ?,"
            " cache_read_input_tokens = ?, cache_creation_input_tokens = ?, duration = ?, last_seq = ?,"
            " reply_clipped = ? WHERE id = ?",
            (
                outcome, code, reply, usage.input_tokens, usage.output_tokens,
                usage.cache_read_input_tokens, usage.cache_creation_input_tokens,
                max(0.0, batch.mono - turn.mono), seq, int(turn.clipped), turn.row,
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
