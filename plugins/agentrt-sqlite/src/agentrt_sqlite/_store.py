"""The thread store and the bot store, backed by the same database file.

Every method is async and runs its SQL in a worker thread; one connection is
shared under a lock (opened on first use, so creating a store does no I/O).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic
from agentrt.threads import ThreadRecord, ThreadSummary

from ._bot_rows import BotRows
from ._reading import ThreadEvents, transcript_of
from ._schema import connect

__all__ = ["SqliteStore", "ThreadSummary", "SESSION_ID_RE"]

T = TypeVar("T")

#: The shape of a native session id that may be passed to ``--resume``.
SESSION_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,256}")


class SqliteStore:
    """:class:`agentrt.threads.ThreadStore`, :class:`~agentrt.threads.ThreadBrowser` and :class:`agentrt.bots.BotStore`.

    Over one SQLite file.  The bot methods delegate to a held :class:`BotRows`
    that runs its SQL through this store's connection and lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pages = ThreadEvents()
        self._bots = BotRows(self._run)

    # -- plumbing --------------------------------------------------------
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await trio.to_thread.run_sync(self._locked, fn)

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._db is None:
                self._db = connect(self.path)
            return fn(self._db)

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""

        def close() -> None:
            with self._lock:
                self._pages = ThreadEvents()
                if self._db is not None:
                    self._db.close()
                    self._db = None

        await trio.to_thread.run_sync(close)

    # -- bots (agentrt.bots.BotStore, in BotRows) -------------------------
    async def get_bot(self, bot_id: str) -> BotRecord | None:
        """The bot's record, or ``None``."""
        return await self._bots.get_bot(bot_id)

    async def save_bot(self, record: BotRecord) -> None:
        """Create or replace the bot's record (``updated_at`` defaults to now)."""
        await self._bots.save_bot(record)

    async def update_bot(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord]
    ) -> tuple[BotRecord, BotRecord] | None:
        """Atomic read-modify-write (see :meth:`BotRows.update_bot`): ``(old, new)``, or ``None`` if unknown."""
        return await self._bots.update_bot(bot_id, change)

    async def list_bots(self) -> Sequence[BotRecord]:
        """Every bot, ordered by id."""
        return await self._bots.list_bots()

    async def delete_bot(self, bot_id: str) -> None:
        """Forget a bot, its state history and its timeline."""
        await self._bots.delete_bot(bot_id)

    async def append_timeline(self, bot_id: str, entry: Mapping[str, Any]) -> None:
        """Append one applied lifecycle event ``{type, message, payload}`` to the bot's timeline."""
        await self._bots.append_timeline(bot_id, entry)

    async def timeline(self, bot_id: str, *, offset: int = 0, limit: int = 100) -> Sequence[Mapping[str, Any]]:
        """The bot's applied lifecycle events, oldest first, paged."""
        return await self._bots.timeline(bot_id, offset=offset, limit=limit)

    async def state_history(self, bot_id: str) -> list[dict[str, Any]]:
        """The bot's state changes, oldest first (from ``state_changed`` events)."""
        return await self._bots.state_history(bot_id)

    # -- threads -----------------------------------------------------------
    async def get_thread(self, name: str) -> ThreadRecord | None:
        """The thread called ``name``; an invalid stored session id comes back as ``None``."""
        record, _ = await self.check_thread(name)
        return record

    async def check_thread(self, name: str) -> tuple[ThreadRecord | None, Diagnostic | None]:
        """The thread and, when its stored session id cannot be resumed, why (a diagnostic)."""

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                "SELECT name, dialect, executable, model, session_id, agent FROM threads WHERE name = ?",
                (name,),
            ).fetchone()

        row = await self._run(q)
        if row is None:
            return None, None
        record, diag = _thread(row)
        return record, diag

    async def save_thread(self, record: ThreadRecord) -> None:
        """Create or update a thread (an invalid session id is stored as none)."""
        session = record.session_id
        if session is not None and not SESSION_ID_RE.fullmatch(session):
            session = None
        now = time.time()

        def q(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO threads (name, dialect, executable, model, session_id, agent, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET dialect = excluded.dialect,"
                " executable = excluded.executable, model = excluded.model,"
                " session_id = excluded.session_id, agent = COALESCE(excluded.agent, threads.agent),"
                " updated_at = excluded.updated_at",
                (record.name, record.dialect, record.executable, record.model, session, record.agent, now, now),
            )

        await self._run(q)

    async def list_threads(self) -> list[ThreadSummary]:
        """Every thread, most recently updated first."""

        def q(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT t.name, t.dialect, t.executable, t.model, t.session_id, t.agent, t.created_at,"
                " t.updated_at, (SELECT count(*) FROM turns u JOIN conversations c"
                " ON u.conversation_id = c.id WHERE c.thread_id = t.id)"
                " FROM threads t ORDER BY t.updated_at DESC, t.name"
            ).fetchall()

        rows = await self._run(q)
        return [ThreadSummary(record=_thread(r[:6])[0], created_at=r[6], updated_at=r[7], turns=r[8]) for r in rows]

    async def delete_thread(self, name: str) -> bool:
        """Forget a thread with its conversations, turns, events and transcripts; ``False`` if unknown."""

        def q(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT id FROM threads WHERE name = ?", (name,)).fetchone()
                if row is None:
                    db.execute("ROLLBACK")
                    return False
                ids = [r[0] for r in db.execute("SELECT id FROM conversations WHERE thread_id = ?", (row[0],))]
                files = [p for p in (transcript_of(db, cid) for cid in ids) if p is not None]
                db.execute(
                    "DELETE FROM events WHERE source IN (SELECT id FROM conversations WHERE thread_id = ?)",
                    (row[0],),
                )
                # turns and conversations go by ON DELETE CASCADE.
                db.execute("DELETE FROM threads WHERE id = ?", (row[0],))
                db.execute("COMMIT")
                for path in files:  # after the commit: a crash in between leaves a file no row names, never the reverse
                    path.unlink(missing_ok=True)
                return True
            except BaseException:
                db.execute("ROLLBACK")
                raise

        return await self._run(q)

    async def rename_thread(self, old: str, new: str) -> bool:
        """Rename a thread (its conversations follow); ``False`` if ``old`` is unknown.

        ``thread_exists`` if ``new`` is taken; ``invalid_thread_name`` if it is blank.
        """
        if not new.strip() or len(new) > 256 or any(ord(ch) < 32 for ch in new):
            raise AgentrtError("invalid_thread_name", "a thread name is 1 to 256 printable characters")

        def q(db: sqlite3.Connection) -> bool:
            try:
                cur = db.execute("UPDATE threads SET name = ?, updated_at = ? WHERE name = ?", (new, time.time(), old))
            except sqlite3.IntegrityError:
                raise AgentrtError("thread_exists", f"a thread named {new[:64]!r} already exists") from None
            return cur.rowcount > 0

        return await self._run(q)

    async def search_logs(
        self, *, limit: int | None = 10, query: str | None = None, agent: str | None = None
    ) -> list[dict[str, Any]]:
        """Recorded turns newest first, full-text matched by ``query`` (see :mod:`agentrt_sqlite._logs`)."""
        from ._logs import search_turns

        return await self._run(lambda db: search_turns(db, limit=limit, query=query, agent=agent))

    async def record_approval(self, decision: Any) -> None:
        """Store one tool-approval decision (:class:`agentrt.approval.ApprovalDecision`)."""
        from ._logs import record_approval

        await self._run(lambda db: record_approval(db, decision))

    async def list_approvals(
        self, *, limit: int | None = 10, agent: str | None = None, conversation: str | None = None
    ) -> list[dict[str, Any]]:
        """Tool-approval decisions newest first (see :func:`agentrt_sqlite._logs.list_approvals`)."""
        from ._logs import list_approvals

        return await self._run(lambda db: list_approvals(db, limit=limit, agent=agent, conversation=conversation))

    async def prune(self, *, max_age_days: float | None = None, max_size_bytes: int | None = None) -> Any:
        """Remove whole conversations, oldest first (see :func:`agentrt_sqlite._prune.prune`); the report."""
        from ._prune import prune

        return await self._run(lambda db: prune(db, max_age_days=max_age_days, max_size_bytes=max_size_bytes))

    async def latest_conversation(self, agent: str | None = None) -> dict[str, Any] | None:
        """The newest conversation with a native session id: what ``agentrt run -c`` continues."""
        from ._logs import latest_conversation

        return await self._run(lambda db: latest_conversation(db, agent=agent))

    async def thread_turns(
        self, name: str, limit: int | None = None, *, reply_chars: int | None = None
    ) -> list[dict[str, Any]]:
        """The thread's turns, oldest first, as dicts with the keys :data:`agentrt.threads.TURN_FIELDS`.

        Also ``message``: a failed turn's message (``None`` for turns recorded before schema v8).

        ``limit`` keeps only the first ones (a title needs one turn, not all).
        ``reply_chars`` bounds each reply to its first that many characters
        (a page reads the rest with :meth:`reply_part`): each turn then also
        has ``reply_more``, true when the reply goes on, and no reply is read
        whole, so the memory a thread costs is bounded however long its replies.
        """
        from ._logs import full_reply, reply_head

        cap = -1 if limit is None else max(0, int(limit))
        chars = -1 if reply_chars is None else max(0, int(reply_chars))

        def q(db: sqlite3.Connection) -> list[dict[str, Any]]:
            cur = db.execute(
                "SELECT u.conversation_id, u.turn, u.prompt,"
                " CASE WHEN ?1 < 0 THEN u.reply ELSE substr(u.reply, 1, ?1) END AS reply, u.outcome, u.code,"
                " u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens,"
                " u.started_at, u.duration, u.message, CASE WHEN ?1 < 0 THEN 0 ELSE length(u.reply) > ?1 END,"
                " u.reply_clipped, u.first_seq, u.last_seq, u.tx_end FROM turns u"
                " JOIN conversations c ON u.conversation_id = c.id"
                " JOIN threads t ON c.thread_id = t.id WHERE t.name = ?2 ORDER BY u.started_at, u.id LIMIT ?3",
                (chars, name, cap),
            )
            cols = [d[0] for d in cur.description][:-5]
            out = []
            for r in cur.fetchall():
                turn = dict(zip(cols, r))
                longer, clipped, first_seq, last_seq, tx_end = r[-5:]
                if reply_chars is not None:
                    turn["reply_more"] = bool(longer or clipped)
                    if clipped and len(turn["reply"] or "") < chars:
                        # The row holds less than a part: the part comes from the transcript (read no further).
                        turn["reply"], turn["reply_more"] = reply_head(
                            db, turn["conversation_id"], first_seq, last_seq, tx_end, chars)
                elif clipped:  # the column has the first part only: read the whole from the transcript
                    turn["reply"] = full_reply(db, turn["conversation_id"], first_seq, last_seq, tx_end)
                out.append(turn)
            return out

        return await self._run(q)

    async def reply_part(
        self, name: str, conversation_id: str, turn: int, offset: int, size: int
    ) -> tuple[str, bool] | None:
        """Characters ``offset`` to ``offset + size`` of a turn's reply, and whether more follow.

        ``None`` when the thread ``name`` has no such turn.  A reply longer than
        its row holds is read from its text deltas one at a time, so a part of a
        reply of any length costs about ``size`` characters of memory.
        """
        from ._logs import reply_slice

        return await self._run(lambda db: reply_slice(db, name, conversation_id, turn, offset, size))

    async def thread_events(self, name: str, *, after: int = 0, limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
        """A page of the thread's event envelopes, in order, and the cursor for the next.

        Pass the returned cursor as ``after`` until the page comes back empty.
        The events are the thread's transcripts replayed (see
        :mod:`agentrt_sqlite._replay`), or the rows of conversations recorded
        before transcripts; reading page after page continues one replay.
        """
        limit = max(1, min(int(limit), 10_000))
        return await self._run(lambda db: self._pages.page(db, name, after, limit))


def _thread(row: Sequence[Any]) -> tuple[ThreadRecord, Diagnostic | None]:
    name, dialect, executable, model, session, agent = row
    diag = None
    if session is not None and not SESSION_ID_RE.fullmatch(session):
        # Never hand a malformed id to --resume; say so without echoing it.
        diag = Diagnostic(
            code="invalid_resume_session_id",
            detail=f"thread {name!r} has a stored session id that is not a valid resume id; starting fresh",
        )
        session = None
    record = ThreadRecord(
        name=name, dialect=dialect, executable=executable, model=model, session_id=session, agent=agent
    )
    return record, diag
