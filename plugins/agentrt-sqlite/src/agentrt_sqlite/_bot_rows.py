"""The bot half of :class:`~agentrt_sqlite.api.SqliteStore`: records, state history and timelines.

The store holds a :class:`BotRows` and delegates its bot methods to it; the rows run
their SQL through the store's runner (its database thread and lock), so both halves
share one connection without sharing state.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs
import orjson

from agentrt.bots import BotRecord

__all__ = ["BotRows", "Runner"]

T = TypeVar("T")

_BOT_COLUMNS = (
    "bot_id",
    "desired_state",
    "status",
    "pid",
    "process_started_at",
    "restart_count",
    "backoff_until",
    "last_error_code",
    "last_error_message",
    "last_qr_code_url",
    "last_qr_code_id",
    "account_id",
    "config",
    "updated_at",
    "model",
)


_SAVE_BOT = f"INSERT OR REPLACE INTO bots ({', '.join(_BOT_COLUMNS)}) VALUES ({', '.join('?' * len(_BOT_COLUMNS))})"


def _bot_params(record: BotRecord) -> tuple[Any, ...]:
    values = attrs.asdict(record)
    values["config"] = orjson.dumps(dict(record.config), default=str).decode()
    if values["updated_at"] is None:
        values["updated_at"] = time.time()
    return tuple(values[c] for c in _BOT_COLUMNS)


class Runner(Protocol):
    """Runs ``fn`` on the store's connection in its database thread, under its lock; returns its result."""

    async def __call__(self, fn: Callable[[sqlite3.Connection], T], /) -> T: ...


class BotRows:
    """:class:`agentrt.bots.BotStore` over the ``bots``, ``bot_state_history`` and ``bot_timeline`` tables.

    Holds no connection: every query goes through ``run``, the owning store's runner.
    """

    def __init__(self, run: Runner) -> None:
        self._run = run

    async def get_bot(self, bot_id: str) -> BotRecord | None:
        """The bot's record, or ``None``."""

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(f"SELECT {', '.join(_BOT_COLUMNS)} FROM bots WHERE bot_id = ?", (bot_id,)).fetchone()

        row = await self._run(q)
        return None if row is None else _bot(row)

    async def save_bot(self, record: BotRecord) -> None:
        """Create or replace the bot's record (``updated_at`` defaults to now)."""
        params = _bot_params(record)

        def q(db: sqlite3.Connection) -> None:
            db.execute(_SAVE_BOT, params)

        await self._run(q)

    async def update_bot(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord]
    ) -> tuple[BotRecord, BotRecord] | None:
        """Atomic read-modify-write in one transaction: ``(old, new)``, or ``None`` if unknown.

        ``change`` runs in the database thread with the write lock held: it must be
        quick and pure.  A changed record gets ``updated_at`` now.
        """

        def q(db: sqlite3.Connection) -> tuple[BotRecord, BotRecord] | None:
            # IMMEDIATE takes the write lock before the read: no other process can
            # write the row between this read and this write.
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(f"SELECT {', '.join(_BOT_COLUMNS)} FROM bots WHERE bot_id = ?", (bot_id,)).fetchone()
                if row is None:
                    db.execute("ROLLBACK")
                    return None
                old = _bot(row)
                new = change(old)
                if new is not old:
                    new = attrs.evolve(new, updated_at=time.time())
                    db.execute(_SAVE_BOT, _bot_params(new))
                db.execute("COMMIT")
                return old, new
            except BaseException:
                db.execute("ROLLBACK")
                raise

        return await self._run(q)

    async def list_bots(self) -> Sequence[BotRecord]:
        """Every bot, ordered by id."""

        def q(db: sqlite3.Connection) -> list[Any]:
            return db.execute(f"SELECT {', '.join(_BOT_COLUMNS)} FROM bots ORDER BY bot_id").fetchall()

        return [_bot(r) for r in await self._run(q)]

    async def delete_bot(self, bot_id: str) -> None:
        """Forget a bot, its state history and its timeline."""

        def q(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("bots", "bot_state_history", "bot_timeline"):
                    db.execute(f"DELETE FROM {table} WHERE bot_id = ?", (bot_id,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        await self._run(q)

    async def append_timeline(self, bot_id: str, entry: Mapping[str, Any]) -> None:
        """Append one applied lifecycle event ``{type, message, payload}`` to the bot's timeline.

        The database sink does this itself for every :class:`~agentrt.events.Lifecycle`
        event whose batch source is the bot; this is for supervisors without a sink.
        """
        payload = orjson.dumps(dict(entry.get("payload") or {}), default=str).decode()

        def q(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO bot_timeline (bot_id, type, message, payload, at) VALUES (?, ?, ?, ?, ?)",
                (bot_id, str(entry.get("type", "")), str(entry.get("message", "")), payload, time.time()),
            )

        await self._run(q)

    async def timeline(self, bot_id: str, *, offset: int = 0, limit: int = 100) -> Sequence[Mapping[str, Any]]:
        """The bot's applied lifecycle events, oldest first, paged."""
        offset, limit = max(0, int(offset)), max(0, min(int(limit), 1000))

        def q(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT type, message, payload, at FROM bot_timeline WHERE bot_id = ? ORDER BY id LIMIT ? OFFSET ?",
                (bot_id, limit, offset),
            ).fetchall()

        return [{"type": t, "message": m, "payload": orjson.loads(p), "at": a} for t, m, p, a in await self._run(q)]

    async def state_history(self, bot_id: str) -> list[dict[str, Any]]:
        """The bot's state changes, oldest first (from ``state_changed`` events)."""

        def q(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT state, previous, reason, at FROM bot_state_history WHERE bot_id = ? ORDER BY id",
                (bot_id,),
            ).fetchall()

        return [{"state": s, "previous": p, "reason": r, "at": a} for s, p, r, a in await self._run(q)]


def _bot(row: Sequence[Any]) -> BotRecord:
    values = dict(zip(_BOT_COLUMNS, row))
    values["config"] = orjson.loads(values["config"] or "{}")
    return BotRecord(**values)
