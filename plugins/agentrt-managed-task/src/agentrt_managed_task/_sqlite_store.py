"""The embedded SQLite task store: WAL, one connection, ``BEGIN IMMEDIATE`` around every write."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._store import (
    LEASE_EXPIRED_MESSAGE,
    TENANT,
    AgentOffline,
    StoreConflict,
    StoreNotFound,
    TaskRow,
    canonical_json,
    row_from_mapping,
    rows_equal_result,
)

__all__ = ["SqliteCore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    task_type TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    status TEXT NOT NULL,
    idempotency_key TEXT,
    attempt_id TEXT,
    agent_id TEXT,
    retry_count INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL,
    result_json TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS tasks_idempotency ON tasks (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status, seq);
CREATE TABLE IF NOT EXISTS agents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    registered_at REAL NOT NULL,
    last_seen REAL NOT NULL
);
"""


class SqliteCore:
    """A :class:`~agentrt_managed_task._store.StoreCore` over one SQLite file.

    Several control-plane processes may share the file: claims take the write lock first
    (``BEGIN IMMEDIATE``), so two claimers never see the same pending row.
    """

    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        # isolation_level=None: we issue BEGIN ourselves, so the write lock is taken up front.
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        with self._write() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _row(self, db: sqlite3.Connection, task_id: str) -> TaskRow | None:
        found = db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if found is None else row_from_mapping(dict(found))

    def submit(self, task_type: str, payload: Any, idempotency_key: str | None, now: float) -> tuple[TaskRow, bool]:
        """See :class:`StoreCore`."""
        with self._write() as db:
            if idempotency_key is not None:
                found = db.execute(
                    "SELECT * FROM tasks WHERE tenant = ? AND idempotency_key = ?", (TENANT, idempotency_key)
                ).fetchone()
                if found is not None:
                    return row_from_mapping(dict(found)), False
            task_id = str(uuid.uuid4())
            db.execute(
                "INSERT INTO tasks (id, tenant, task_type, payload_json, status, idempotency_key,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
                (task_id, TENANT, task_type, canonical_json(payload), idempotency_key, now, now),
            )
            row = self._row(db, task_id)
        assert row is not None
        return row, True

    def get(self, task_id: str) -> TaskRow | None:
        """See :class:`StoreCore`."""
        with self._lock:
            return self._row(self._db, task_id)

    def list_tasks(self, status: str | None, limit: int) -> list[TaskRow]:
        """See :class:`StoreCore`."""
        with self._lock:
            if status is None:
                rows = self._db.execute("SELECT * FROM tasks ORDER BY seq DESC LIMIT ?", (limit,))
            else:
                rows = self._db.execute(
                    "SELECT * FROM tasks WHERE status = ? ORDER BY seq DESC LIMIT ?", (status, limit)
                )
            return [row_from_mapping(dict(r)) for r in rows.fetchall()]

    def register_agent(self, agent_id: str, name: str, now: float) -> None:
        """See :class:`StoreCore`."""
        with self._write() as db:
            db.execute(
                "INSERT INTO agents (id, name, registered_at, last_seen) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET name = excluded.name, last_seen = excluded.last_seen",
                (agent_id, name, now, now),
            )

    def heartbeat_agent(self, agent_id: str, now: float) -> bool:
        """See :class:`StoreCore`."""
        with self._write() as db:
            return db.execute("UPDATE agents SET last_seen = ? WHERE id = ?", (now, agent_id)).rowcount == 1

    def _reap(self, db: sqlite3.Connection, now: float, max_retries: int) -> int:
        expired = db.execute(
            "SELECT id, retry_count FROM tasks WHERE status = 'running' AND lease_expires_at < ?", (now,)
        ).fetchall()
        for task_id, retries in expired:
            if retries < max_retries:
                db.execute(
                    "UPDATE tasks SET status = 'pending', retry_count = retry_count + 1, attempt_id = NULL,"
                    " agent_id = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ?",
                    (now, task_id),
                )
            else:
                db.execute(
                    "UPDATE tasks SET status = 'failed', error = ?, attempt_id = NULL,"
                    " lease_expires_at = NULL, updated_at = ? WHERE id = ?",
                    (LEASE_EXPIRED_MESSAGE, now, task_id),
                )
        return len(expired)

    def purge(self, finished_before: float, limit: int) -> int:
        """See :class:`StoreCore`."""
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks WHERE status IN ('success', 'failed')"
                " AND updated_at < ? ORDER BY seq LIMIT ?)",
                (finished_before, int(limit)),
            )
            return int(cur.rowcount)

    def reap(self, now: float, max_retries: int) -> int:
        """See :class:`StoreCore`."""
        with self._write() as db:
            return self._reap(db, now, max_retries)

    def claim(
        self,
        agent_id: str,
        slots: int,
        now: float,
        lease_seconds: float,
        max_retries: int,
        stale_seconds: float,
    ) -> list[TaskRow]:
        """See :class:`StoreCore`."""
        with self._write() as db:
            seen = db.execute("SELECT last_seen FROM agents WHERE id = ?", (agent_id,)).fetchone()
            if seen is None or now - seen[0] > stale_seconds:
                raise AgentOffline(agent_id)
            db.execute("UPDATE agents SET last_seen = ? WHERE id = ?", (now, agent_id))
            self._reap(db, now, max_retries)
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT id FROM tasks WHERE status = 'pending' ORDER BY seq LIMIT ?", (slots,)
                ).fetchall()
            ]
            claimed = []
            for task_id in ids:
                db.execute(
                    "UPDATE tasks SET status = 'running', attempt_id = ?, agent_id = ?, lease_expires_at = ?,"
                    " updated_at = ? WHERE id = ?",
                    (str(uuid.uuid4()), agent_id, now + lease_seconds, now, task_id),
                )
                row = self._row(db, task_id)
                assert row is not None
                claimed.append(row)
            return claimed

    def renew(self, task_id: str, attempt_id: str, now: float, lease_seconds: float) -> TaskRow:
        """See :class:`StoreCore`."""
        with self._write() as db:
            row = self._row(db, task_id)
            if row is None:
                raise StoreNotFound(task_id)
            if row.status != "running" or row.attempt_id != attempt_id:
                raise StoreConflict("stale_attempt")
            db.execute(
                "UPDATE tasks SET lease_expires_at = ?, updated_at = ? WHERE id = ?",
                (now + lease_seconds, now, task_id),
            )
            renewed = self._row(db, task_id)
        assert renewed is not None
        return renewed

    def complete(
        self, task_id: str, attempt_id: str, status: str, result: Any, error: str | None, now: float
    ) -> tuple[TaskRow, bool]:
        """See :class:`StoreCore`."""
        with self._write() as db:
            row = self._row(db, task_id)
            if row is None:
                raise StoreNotFound(task_id)
            if row.attempt_id != attempt_id:
                raise StoreConflict("stale_attempt")
            if row.status != "running":
                if rows_equal_result(row, status, result):
                    return row, True
                raise StoreConflict("result_conflict")
            db.execute(
                "UPDATE tasks SET status = ?, result_json = ?, error = ?, lease_expires_at = NULL,"
                " updated_at = ? WHERE id = ?",
                (status, canonical_json(result), error, now, task_id),
            )
            done = self._row(db, task_id)
        assert done is not None
        return done, False

    def close(self) -> None:
        """See :class:`StoreCore`."""
        with self._lock:
            self._db.close()
