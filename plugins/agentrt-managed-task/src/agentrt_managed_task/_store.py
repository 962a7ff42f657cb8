"""The control plane's storage protocol: one small interface, an SQLite and a Redis implementation.

Both implement :class:`Store` (async).  SQLite (stdlib ``sqlite3``) is a synchronous
:class:`StoreCore` run in a worker thread through :class:`ThreadedStore`, so the trio thread never
blocks on the file; Redis (:class:`~agentrt_managed_task._redis_store.RedisStore`) is trio-native
(``coredis``) and needs no thread.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import attrs
import trio

__all__ = [
    "TaskRow",
    "Store",
    "StoreCore",
    "ThreadedStore",
    "StoreConflict",
    "StoreNotFound",
    "AgentOffline",
    "LEASE_EXPIRED_MESSAGE",
    "TENANT",
    "canonical_json",
]

TENANT = "local"
LEASE_EXPIRED_MESSAGE = "task lease expired after the configured retry limit"
T = TypeVar("T")


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: equal values give equal strings (duplicate-result detection)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


class StoreNotFound(LookupError):
    """No task with that id."""


class StoreConflict(Exception):
    """The request conflicts with the task's state (stale attempt, different result, not running)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AgentOffline(Exception):
    """The worker is not registered or has not been seen within the stale window."""


@attrs.frozen(kw_only=True)
class TaskRow:
    """One task as stored."""

    id: str
    tenant: str
    task_type: str
    payload: Any
    status: str
    idempotency_key: str | None
    attempt_id: str | None
    agent_id: str | None
    retry_count: int
    lease_expires_at: float | None
    result: Any
    error: str | None
    created_at: float
    updated_at: float

    def public(self) -> dict[str, Any]:
        """The API's view of the row (the §C response shape)."""
        return {
            "id": self.id,
            "tenant": self.tenant,
            "task_type": self.task_type,
            "payload": self.payload,
            "status": self.status,
            "idempotency_key": self.idempotency_key,
            "attempt_id": self.attempt_id,
            "agent_id": self.agent_id,
            "retry_count": self.retry_count,
            "lease_expires_at": self.lease_expires_at,
            "result": self.result,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


class StoreCore(Protocol):
    """The synchronous storage operations of the SQLite store (called from worker threads).

    ``now`` is wall-clock seconds (``time.time()``), passed in so tests and several control-plane
    processes share one clock source: the storage's callers.
    """

    def submit(self, task_type: str, payload: Any, idempotency_key: str | None, now: float) -> tuple[TaskRow, bool]:
        """Store a pending task, or return the row already stored under that key (``created=False``)."""
        ...

    def get(self, task_id: str) -> TaskRow | None:
        """The task, or ``None``."""
        ...

    def list_tasks(self, status: str | None, limit: int) -> list[TaskRow]:
        """Tasks newest first, optionally of one status."""
        ...

    def register_agent(self, agent_id: str, name: str, now: float) -> None:
        """Record (or refresh) a worker."""
        ...

    def heartbeat_agent(self, agent_id: str, now: float) -> bool:
        """Refresh a worker's last-seen time; ``False`` when it never registered."""
        ...

    def claim(
        self,
        agent_id: str,
        slots: int,
        now: float,
        lease_seconds: float,
        max_retries: int,
        stale_seconds: float,
    ) -> list[TaskRow]:
        """Reap expired leases, then atomically claim up to ``slots`` oldest pending tasks."""
        ...

    def renew(self, task_id: str, attempt_id: str, now: float, lease_seconds: float) -> TaskRow:
        """Extend the lease of a running attempt (:class:`StoreConflict` when it is not current)."""
        ...

    def complete(
        self, task_id: str, attempt_id: str, status: str, result: Any, error: str | None, now: float
    ) -> tuple[TaskRow, bool]:
        """Store an attempt's result; ``(row, duplicate)``."""
        ...

    def reap(self, now: float, max_retries: int) -> int:
        """Requeue (or fail, past the retry limit) every running task whose lease expired."""
        ...

    def purge(self, finished_before: float, limit: int) -> int:
        """Forget up to ``limit`` finished tasks (``success`` or ``failed``) last updated before ``finished_before``.

        Returns how many.  A forgotten task's idempotency key goes with it: a
        later submission with that key is a new task.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class Store(Protocol):
    """What the control plane awaits: its storage, SQLite (:class:`ThreadedStore`) or Redis.

    Times are taken by the store itself (``time.time()``) when it is called.
    """

    async def submit(self, task_type: str, payload: Any, idempotency_key: str | None) -> tuple[TaskRow, bool]:
        """See :meth:`StoreCore.submit`."""
        ...

    async def get(self, task_id: str) -> TaskRow | None:
        """See :meth:`StoreCore.get`."""
        ...

    async def list_tasks(self, status: str | None, limit: int) -> list[TaskRow]:
        """See :meth:`StoreCore.list_tasks`."""
        ...

    async def register_agent(self, agent_id: str, name: str) -> None:
        """See :meth:`StoreCore.register_agent`."""
        ...

    async def heartbeat_agent(self, agent_id: str) -> bool:
        """See :meth:`StoreCore.heartbeat_agent`."""
        ...

    async def claim(
        self, agent_id: str, slots: int, lease_seconds: float, max_retries: int, stale_seconds: float
    ) -> list[TaskRow]:
        """See :meth:`StoreCore.claim`."""
        ...

    async def renew(self, task_id: str, attempt_id: str, lease_seconds: float) -> TaskRow:
        """See :meth:`StoreCore.renew`."""
        ...

    async def complete(
        self, task_id: str, attempt_id: str, status: str, result: Any, error: str | None
    ) -> tuple[TaskRow, bool]:
        """See :meth:`StoreCore.complete`."""
        ...

    async def reap(self, max_retries: int, *, now: float | None = None) -> int:
        """See :meth:`StoreCore.reap` (``now``: reap as of that time instead of the clock's)."""
        ...

    async def purge(self, retention_seconds: float, limit: int = 500) -> int:
        """Forget up to ``limit`` tasks finished over ``retention_seconds`` ago (:meth:`StoreCore.purge`)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class ThreadedStore:
    """Async facade: every :class:`StoreCore` call runs in a worker thread, bounded by a limiter."""

    def __init__(self, core: StoreCore, *, concurrency: int = 1) -> None:
        self.core = core
        self._limiter = trio.CapacityLimiter(concurrency)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(functools.partial(fn, *args), limiter=self._limiter)

    async def submit(self, task_type: str, payload: Any, idempotency_key: str | None) -> tuple[TaskRow, bool]:
        """See :meth:`StoreCore.submit`."""
        return await self._run(self.core.submit, task_type, payload, idempotency_key, time.time())

    async def get(self, task_id: str) -> TaskRow | None:
        """See :meth:`StoreCore.get`."""
        return await self._run(self.core.get, task_id)

    async def list_tasks(self, status: str | None, limit: int) -> list[TaskRow]:
        """See :meth:`StoreCore.list_tasks`."""
        return await self._run(self.core.list_tasks, status, limit)

    async def register_agent(self, agent_id: str, name: str) -> None:
        """See :meth:`StoreCore.register_agent`."""
        await self._run(self.core.register_agent, agent_id, name, time.time())

    async def heartbeat_agent(self, agent_id: str) -> bool:
        """See :meth:`StoreCore.heartbeat_agent`."""
        return await self._run(self.core.heartbeat_agent, agent_id, time.time())

    async def claim(
        self, agent_id: str, slots: int, lease_seconds: float, max_retries: int, stale_seconds: float
    ) -> list[TaskRow]:
        """See :meth:`StoreCore.claim`."""
        return await self._run(self.core.claim, agent_id, slots, time.time(), lease_seconds, max_retries, stale_seconds)

    async def renew(self, task_id: str, attempt_id: str, lease_seconds: float) -> TaskRow:
        """See :meth:`StoreCore.renew`."""
        return await self._run(self.core.renew, task_id, attempt_id, time.time(), lease_seconds)

    async def complete(
        self, task_id: str, attempt_id: str, status: str, result: Any, error: str | None
    ) -> tuple[TaskRow, bool]:
        """See :meth:`StoreCore.complete`."""
        return await self._run(self.core.complete, task_id, attempt_id, status, result, error, time.time())

    async def reap(self, max_retries: int, *, now: float | None = None) -> int:
        """See :meth:`Store.reap`."""
        return await self._run(self.core.reap, time.time() if now is None else now, max_retries)

    async def purge(self, retention_seconds: float, limit: int = 500) -> int:
        """Forget up to ``limit`` tasks finished over ``retention_seconds`` ago (:meth:`StoreCore.purge`)."""
        return await self._run(self.core.purge, time.time() - retention_seconds, limit)

    async def aclose(self) -> None:
        """Close the core's connections (in a thread: closing may flush)."""
        await self._run(self.core.close)


def rows_equal_result(row: TaskRow, status: str, result: Any) -> bool:
    """Whether a repeated result is identical to the stored one."""
    return row.status == status and canonical_json(row.result) == canonical_json(result)


def coerce_float(value: Any) -> float | None:
    """``None`` for absent values, else a float."""
    return None if value in (None, "", b"") else float(value)


def payload_of(raw: str | bytes | None) -> Any:
    """Parse stored JSON (``None`` stays ``None``)."""
    return None if raw in (None, "", b"") else json.loads(raw)


def row_from_mapping(data: Mapping[str, Any]) -> TaskRow:
    """Build a row from stored columns (JSON text for payload/result; empty text means absent)."""

    def text(name: str) -> str | None:
        value = data.get(name)
        if isinstance(value, bytes):
            value = value.decode()
        return None if value in (None, "") else str(value)

    return TaskRow(
        id=str(text("id")),
        tenant=text("tenant") or TENANT,
        task_type=str(text("task_type")),
        payload=payload_of(data.get("payload_json")),
        status=str(text("status")),
        idempotency_key=text("idempotency_key"),
        attempt_id=text("attempt_id"),
        agent_id=text("agent_id"),
        retry_count=int(data.get("retry_count") or 0),
        lease_expires_at=coerce_float(data.get("lease_expires_at")),
        result=payload_of(data.get("result_json")),
        error=text("error"),
        created_at=float(data["created_at"]),
        updated_at=float(data["updated_at"]),
    )
