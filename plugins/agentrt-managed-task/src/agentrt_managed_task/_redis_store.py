"""The Redis task store: every state change is one Lua script, so claims are atomic across processes.

Layout under a key prefix (default ``agentrt:cp:``): ``task:<id>`` hashes (payload and result kept
as opaque JSON text: Lua never re-encodes them), ``st:<status>`` sorted sets scored by creation
sequence (``st:pending`` is the queue, oldest first), ``leases`` scored by lease expiry, ``all``,
``idem`` (tenant NUL key -> id), ``agents`` (id -> last seen).  Status changes are also published
on ``task:<tenant>:<id>`` as ``{"type":"task.status","payload":{task_id,status}}``.  A worker that
dies mid-task simply stops renewing; the next claim (or the maintenance loop) reaps the lease.

The client is ``coredis`` under trio (:mod:`agentrt.redislink`): every call is awaited on the trio
thread, with no worker thread per call; scripts run by digest and are loaded again after a restart.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from agentrt.redislink import LuaScript, RedisLink, RedisScriptError, connect_redis

from ._store import (
    LEASE_EXPIRED_MESSAGE,
    TENANT,
    AgentOffline,
    StoreConflict,
    StoreNotFound,
    TaskRow,
    canonical_json,
    row_from_mapping,
)

__all__ = ["RedisStore", "open_redis_store"]

_COMMON = r"""
local p = KEYS[1]
local function move(id, old, new)
  local k = p .. 'task:' .. id
  local seq = redis.call('HGET', k, 'seq')
  redis.call('ZREM', p .. 'st:' .. old, id)
  redis.call('ZADD', p .. 'st:' .. new, seq, id)
  redis.call('HSET', k, 'status', new)
  local tenant = redis.call('HGET', k, 'tenant')
  redis.call('PUBLISH', 'task:' .. tenant .. ':' .. id,
    '{"type":"task.status","payload":{"task_id":"' .. id .. '","status":"' .. new .. '"}}')
end
local function reap(now, now_text, max_retries, message)
  local expired = redis.call('ZRANGEBYSCORE', p .. 'leases', '-inf', '(' .. now_text)
  for _, id in ipairs(expired) do
    local k = p .. 'task:' .. id
    redis.call('ZREM', p .. 'leases', id)
    local retries = tonumber(redis.call('HGET', k, 'retry_count'))
    if retries < max_retries then
      move(id, 'running', 'pending')
      redis.call('HSET', k, 'retry_count', retries + 1, 'attempt_id', '', 'agent_id', '',
        'lease_expires_at', '', 'updated_at', now_text)
    else
      move(id, 'running', 'failed')
      redis.call('HSET', k, 'error', message, 'attempt_id', '', 'lease_expires_at', '',
        'updated_at', now_text)
    end
  end
  return #expired
end
"""

_SUBMIT = r"""
local p = KEYS[1]
local id, tenant, task_type, payload, key, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if key ~= '' then
  local existing = redis.call('HGET', p .. 'idem', tenant .. '\0' .. key)
  if existing then return {0, redis.call('HGETALL', p .. 'task:' .. existing)} end
end
local seq = redis.call('INCR', p .. 'seq')
redis.call('HSET', p .. 'task:' .. id, 'id', id, 'tenant', tenant, 'task_type', task_type,
  'payload_json', payload, 'status', 'pending', 'idempotency_key', key, 'retry_count', 0,
  'created_at', now, 'updated_at', now, 'seq', seq)
if key ~= '' then redis.call('HSET', p .. 'idem', tenant .. '\0' .. key, id) end
redis.call('ZADD', p .. 'st:pending', seq, id)
redis.call('ZADD', p .. 'all', seq, id)
return {1, redis.call('HGETALL', p .. 'task:' .. id)}
"""

_CLAIM = (
    _COMMON
    + r"""
local agent, slots, now_text, lease_text, max_retries, stale, message =
  ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local now = tonumber(now_text)
local seen = redis.call('HGET', p .. 'agents', agent)
if (not seen) or (now - tonumber(seen) > stale) then return redis.error_reply('agent_offline') end
redis.call('HSET', p .. 'agents', agent, now_text)
reap(now, now_text, max_retries, message)
local ids = redis.call('ZRANGE', p .. 'st:pending', 0, slots - 1)
local out = {}
for i, id in ipairs(ids) do
  local k = p .. 'task:' .. id
  move(id, 'pending', 'running')
  redis.call('HSET', k, 'attempt_id', ARGV[7 + i], 'agent_id', agent, 'lease_expires_at', lease_text,
    'updated_at', now_text)
  redis.call('ZADD', p .. 'leases', tonumber(lease_text), id)
  out[#out + 1] = redis.call('HGETALL', k)
end
return out
"""
)

_REAP = (
    _COMMON
    + r"""
return reap(tonumber(ARGV[1]), ARGV[1], tonumber(ARGV[2]), ARGV[3])
"""
)

_RENEW = (
    _COMMON
    + r"""
local id, attempt, now_text, lease_text = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local k = p .. 'task:' .. id
if redis.call('EXISTS', k) == 0 then return redis.error_reply('not_found') end
local row = redis.call('HMGET', k, 'status', 'attempt_id')
if row[1] ~= 'running' or row[2] ~= attempt then return redis.error_reply('stale_attempt') end
redis.call('HSET', k, 'lease_expires_at', lease_text, 'updated_at', now_text)
redis.call('ZADD', p .. 'leases', tonumber(lease_text), id)
return redis.call('HGETALL', k)
"""
)

_COMPLETE = (
    _COMMON
    + r"""
local id, attempt, status, result, err, now_text = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local k = p .. 'task:' .. id
if redis.call('EXISTS', k) == 0 then return redis.error_reply('not_found') end
local row = redis.call('HMGET', k, 'status', 'attempt_id', 'result_json')
if row[2] ~= attempt then return redis.error_reply('stale_attempt') end
if row[1] ~= 'running' then
  if row[1] == status and row[3] == result then return {1, redis.call('HGETALL', k)} end
  return redis.error_reply('result_conflict')
end
redis.call('ZREM', p .. 'leases', id)
move(id, 'running', status)
redis.call('HSET', k, 'result_json', result, 'error', err, 'lease_expires_at', '', 'updated_at', now_text)
return {0, redis.call('HGETALL', k)}
"""
)


# Finished tasks are in st:success / st:failed by creation sequence, not by finish time: look at the
# oldest `limit` of each and forget those finished before the cutoff (a long task finished late is
# kept for its own full retention, and only delays, never blocks, the ones behind it).
_PURGE = r"""
local p = KEYS[1]
local cutoff, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = 0
for _, st in ipairs({'success', 'failed'}) do
  local ids = redis.call('ZRANGE', p .. 'st:' .. st, 0, limit - 1)
  for _, id in ipairs(ids) do
    if n >= limit then return n end
    local k = p .. 'task:' .. id
    local row = redis.call('HMGET', k, 'updated_at', 'tenant', 'idempotency_key')
    if row[1] and tonumber(row[1]) < cutoff then
      if row[3] and row[3] ~= '' then redis.call('HDEL', p .. 'idem', row[2] .. '\0' .. row[3]) end
      redis.call('DEL', k)
      redis.call('ZREM', p .. 'st:' .. st, id)
      redis.call('ZREM', p .. 'all', id)
      n = n + 1
    end
  end
end
return n
"""

_SCRIPTS = {
    name: LuaScript(source)
    for name, source in (
        ("submit", _SUBMIT),
        ("claim", _CLAIM),
        ("reap", _REAP),
        ("renew", _RENEW),
        ("complete", _COMPLETE),
        ("purge", _PURGE),
    )
}


def _pairs(flat: list[Any]) -> dict[str, Any]:
    it = iter(flat)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)}


def _row(data: dict[Any, Any]) -> TaskRow:
    return row_from_mapping({(k.decode() if isinstance(k, bytes) else k): v for k, v in data.items()})


def _text(value: float) -> str:
    # repr: the shortest exact form, so Lua's tonumber reads back the same double.
    return repr(float(value))


class RedisStore:
    """The control plane's store over Redis (the :class:`~agentrt_managed_task._store.Store` interface).

    Every state change is one Lua script (atomic on the server), so any number of control planes
    may share one prefix.  Transport failures raise ``AgentrtError('redis_unavailable')``.
    """

    def __init__(self, link: RedisLink, *, prefix: str = "agentrt:cp:", owns_link: bool = False) -> None:
        self.link = link
        self._keys = [prefix]
        self._prefix = prefix
        self._owns_link = owns_link

    async def _run(self, name: str, *args: str | int | float) -> Any:
        try:
            return await self.link.run(_SCRIPTS[name], keys=self._keys, args=args)
        except RedisScriptError as exc:
            if exc.reason == "not_found":
                raise StoreNotFound(exc.reason) from None
            if exc.reason == "agent_offline":
                raise AgentOffline(exc.reason) from None
            if exc.reason in ("stale_attempt", "result_conflict"):
                raise StoreConflict(exc.reason) from None
            raise

    async def submit(self, task_type: str, payload: Any, idempotency_key: str | None) -> tuple[TaskRow, bool]:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        created, flat = await self._run(
            "submit",
            str(uuid.uuid4()),
            TENANT,
            task_type,
            canonical_json(payload),
            idempotency_key or "",
            _text(time.time()),
        )
        return row_from_mapping(_pairs(flat)), bool(created)

    async def get(self, task_id: str) -> TaskRow | None:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        client = self.link.client
        data = await self.link.call(lambda: client.hgetall(self._prefix + "task:" + task_id))
        return _row(data) if data else None

    async def list_tasks(self, status: str | None, limit: int) -> list[TaskRow]:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        client = self.link.client
        index = self._prefix + ("all" if status is None else "st:" + status)
        ids = await self.link.call(lambda: client.zrange(index, 0, limit - 1, rev=True))

        async def fetch() -> list[dict[Any, Any]]:
            # One round trip for every row (pipelined, not a transaction: a row purged meanwhile is skipped).
            async with client.pipeline(transaction=False) as pipe:
                pending = [pipe.hgetall(self._prefix + "task:" + self._id(task_id)) for task_id in ids]
            return [await reply for reply in pending]

        found = await self.link.call(fetch) if ids else []
        return [_row(d) for d in found if d]

    @staticmethod
    def _id(value: str | bytes) -> str:
        return value.decode() if isinstance(value, bytes) else value

    async def register_agent(self, agent_id: str, name: str) -> None:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        client = self.link.client
        await self.link.call(lambda: client.hset(self._prefix + "agents", {agent_id: _text(time.time())}))

    async def heartbeat_agent(self, agent_id: str) -> bool:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        client = self.link.client
        key = self._prefix + "agents"
        if not await self.link.call(lambda: client.hexists(key, agent_id)):
            return False
        await self.link.call(lambda: client.hset(key, {agent_id: _text(time.time())}))
        return True

    async def claim(
        self, agent_id: str, slots: int, lease_seconds: float, max_retries: int, stale_seconds: float
    ) -> list[TaskRow]:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        now = time.time()
        attempts = [str(uuid.uuid4()) for _ in range(slots)]
        flats = await self._run(
            "claim",
            agent_id,
            slots,
            _text(now),
            _text(now + lease_seconds),
            max_retries,
            _text(stale_seconds),
            LEASE_EXPIRED_MESSAGE,
            *attempts,
        )
        return [row_from_mapping(_pairs(flat)) for flat in flats]

    async def renew(self, task_id: str, attempt_id: str, lease_seconds: float) -> TaskRow:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        now = time.time()
        flat = await self._run("renew", task_id, attempt_id, _text(now), _text(now + lease_seconds))
        return row_from_mapping(_pairs(flat))

    async def complete(
        self, task_id: str, attempt_id: str, status: str, result: Any, error: str | None
    ) -> tuple[TaskRow, bool]:
        """See :class:`~agentrt_managed_task._store.StoreCore`."""
        duplicate, flat = await self._run(
            "complete", task_id, attempt_id, status, canonical_json(result), error or "", _text(time.time())
        )
        return row_from_mapping(_pairs(flat)), bool(duplicate)

    async def reap(self, max_retries: int, *, now: float | None = None) -> int:
        """See :class:`~agentrt_managed_task._store.Store`."""
        when = time.time() if now is None else now
        return int(await self._run("reap", _text(when), max_retries, LEASE_EXPIRED_MESSAGE))

    async def purge(self, retention_seconds: float, limit: int = 500) -> int:
        """Forget up to ``limit`` tasks finished over ``retention_seconds`` ago (see ``StoreCore.purge``)."""
        return int(await self._run("purge", _text(time.time() - retention_seconds), str(int(limit))))

    async def aclose(self) -> None:
        """Close the connections (when this store opened them)."""
        if self._owns_link:
            await self.link.aclose()


async def open_redis_store(url: str, *, prefix: str = "agentrt:cp:") -> RedisStore:
    """Connect to ``url`` and return a store that closes its connections on :meth:`RedisStore.aclose`."""
    return RedisStore(await connect_redis(url), prefix=prefix, owns_link=True)
