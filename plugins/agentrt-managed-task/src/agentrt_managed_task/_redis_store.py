"""The Redis task store: every state change is one Lua script, so claims are atomic across processes.

Layout under a key prefix (default ``agentrt:cp:``): ``task:<id>`` hashes (payload and result kept
as opaque JSON text: Lua never re-encodes them), ``st:<status>`` sorted sets scored by creation
sequence (``st:pending`` is the queue, oldest first), ``leases`` scored by lease expiry, ``all``,
``idem`` (tenant NUL key -> id), ``agents`` (id -> last seen).  Status changes are also published
on ``task:<tenant>:<id>`` as ``{"type":"task.status","payload":{task_id,status}}``.  A worker that
dies mid-task simply stops renewing; the next claim (or the maintenance loop) reaps the lease.
"""

from __future__ import annotations

import uuid
from typing import Any

import redis

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

__all__ = ["RedisCore"]

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

def _pairs(flat: list[Any]) -> dict[str, Any]:
    it = iter(flat)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)}


def _text(value: float) -> str:
    # repr: the shortest exact form, so Lua's tonumber reads back the same double.
    return repr(float(value))


class RedisCore:
    """A :class:`~agentrt_managed_task._store.StoreCore` over redis-py's (thread-safe) sync client."""

    def __init__(self, url: str, *, prefix: str = "agentrt:cp:") -> None:
        self._redis = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        self._keys = [prefix]
        self._prefix = prefix
        self._submit = self._redis.register_script(_SUBMIT)
        self._claim = self._redis.register_script(_CLAIM)
        self._reap_script = self._redis.register_script(_REAP)
        self._renew = self._redis.register_script(_RENEW)
        self._complete = self._redis.register_script(_COMPLETE)
        self._purge = self._redis.register_script(_PURGE)
        self._redis.ping()

    def _call(self, script: Any, *args: Any) -> Any:
        try:
            return script(keys=self._keys, args=list(args))
        except redis.ResponseError as exc:
            reason = str(exc).strip()
            if reason == "not_found":
                raise StoreNotFound(reason) from None
            if reason == "agent_offline":
                raise AgentOffline(reason) from None
            if reason in ("stale_attempt", "result_conflict"):
                raise StoreConflict(reason) from None
            raise

    def submit(self, task_type: str, payload: Any, idempotency_key: str | None, now: float) -> tuple[TaskRow, bool]:
        """See :class:`StoreCore`."""
        created, flat = self._call(
            self._submit,
            str(uuid.uuid4()),
            TENANT,
            task_type,
            canonical_json(payload),
            idempotency_key or "",
            _text(now),
        )
        return row_from_mapping(_pairs(flat)), bool(created)

    def get(self, task_id: str) -> TaskRow | None:
        """See :class:`StoreCore`."""
        data: dict[Any, Any] = self._redis.hgetall(self._prefix + "task:" + task_id)
        return row_from_mapping(_pairs([x for kv in data.items() for x in kv])) if data else None

    def list_tasks(self, status: str | None, limit: int) -> list[TaskRow]:
        """See :class:`StoreCore`."""
        index = self._prefix + ("all" if status is None else "st:" + status)
        ids: list[bytes] = self._redis.zrevrange(index, 0, limit - 1)  # type: ignore[assignment]
        pipe = self._redis.pipeline(transaction=False)
        for task_id in ids:
            pipe.hgetall(self._prefix + "task:" + task_id.decode())
        found: list[dict[Any, Any]] = pipe.execute()
        return [row_from_mapping(_pairs([x for kv in d.items() for x in kv])) for d in found if d]

    def register_agent(self, agent_id: str, name: str, now: float) -> None:
        """See :class:`StoreCore`."""
        self._redis.hset(self._prefix + "agents", agent_id, _text(now))

    def heartbeat_agent(self, agent_id: str, now: float) -> bool:
        """See :class:`StoreCore`."""
        key = self._prefix + "agents"
        if not self._redis.hexists(key, agent_id):
            return False
        self._redis.hset(key, agent_id, _text(now))
        return True

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
        attempts = [str(uuid.uuid4()) for _ in range(slots)]
        flats = self._call(
            self._claim,
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

    def renew(self, task_id: str, attempt_id: str, now: float, lease_seconds: float) -> TaskRow:
        """See :class:`StoreCore`."""
        flat = self._call(self._renew, task_id, attempt_id, _text(now), _text(now + lease_seconds))
        return row_from_mapping(_pairs(flat))

    def complete(
        self, task_id: str, attempt_id: str, status: str, result: Any, error: str | None, now: float
    ) -> tuple[TaskRow, bool]:
        """See :class:`StoreCore`."""
        duplicate, flat = self._call(
            self._complete, task_id, attempt_id, status, canonical_json(result), error or "", _text(now)
        )
        return row_from_mapping(_pairs(flat)), bool(duplicate)

    def purge(self, finished_before: float, limit: int) -> int:
        """See :class:`StoreCore`."""
        return int(self._call(self._purge, _text(finished_before), str(int(limit))))

    def reap(self, now: float, max_retries: int) -> int:
        """See :class:`StoreCore`."""
        return int(self._call(self._reap_script, _text(now), max_retries, LEASE_EXPIRED_MESSAGE))

    def close(self) -> None:
        """See :class:`StoreCore`."""
        self._redis.close()
