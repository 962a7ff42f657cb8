"""The Redis bot store: bot records, their timelines and leases, shared by supervisors on several hosts.

Layout under a key prefix (default ``agentrt:bots:``): ``ids`` (a sorted set of bot ids),
``bot:<id>`` (a hash: ``json`` the record, ``version`` bumped by every write, ``writer`` the node
that last wrote its runtime fields), ``tl:<id>`` (the timeline, a list of JSON entries),
``lease:<id>`` (``node`` and ``token``, expiring with the lease: see :mod:`._lease`),
``token:<id>`` (the bot's fencing counter) and ``nodes`` (a sorted set of node heartbeats).

Every write is one Lua script.  A change is compare-and-set on ``version`` (retried on a
conflict), so :meth:`RedisBotStore.update_bot` is atomic across processes.  The fields a
running supervisor owns (status, pid, restarts, errors, QR code...) are *fenced*: a write that
changes any of them must carry the bot's current lease (node and token) when a lease exists,
and a supervisor node may write them only while it holds the lease; otherwise the script
answers ``fencing_refused``.  The desired state and the settings are the user's and are never
fenced, so ``agentrt bots start/stop`` work from any host at any time.

The connection opens on first use (:func:`agentrt.redislink.connect_redis`) and lives until
:meth:`RedisBotStore.aclose` or the end of the trio run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError
from agentrt.redislink import LuaScript, RedisLink, RedisScriptError, connect_redis

from ._launch import check_bot_id
from ._store import record_from_dict, record_to_dict

__all__ = ["RedisBotStore", "FENCING_REFUSED", "USER_FIELDS", "DEFAULT_PREFIX"]

#: The code of a write refused because the writer does not hold the bot's lease.
FENCING_REFUSED = "fencing_refused"
#: Record fields that belong to the user (never fenced); every other field is the runner's.
USER_FIELDS = frozenset({"bot_id", "desired_state", "config", "updated_at"})
DEFAULT_PREFIX = "agentrt:bots:"
_CAS_ATTEMPTS = 50
_TIMELINE_CAP = 10_000  # entries kept per bot (the oldest are trimmed)

_READ = LuaScript(r"""
local p = KEYS[1]
local out = {}
for i, id in ipairs(ARGV) do
  local h = redis.call('HMGET', p .. 'bot:' .. id, 'json', 'version', 'writer')
  if h[1] then out[#out + 1] = {id, h[1], h[2], h[3] or ''} end
end
return out
""")

_LIST = LuaScript(r"""
local p = KEYS[1]
local out = {}
for _, id in ipairs(redis.call('ZRANGE', p .. 'ids', 0, -1)) do
  local h = redis.call('HMGET', p .. 'bot:' .. id, 'json', 'version', 'writer')
  if h[1] then out[#out + 1] = {id, h[1], h[2], h[3] or ''} end
end
return out
""")

# ARGV: id, expected version ('' = any), json, fenced ('1'/'0'), node ('' = not a supervisor), token.
_WRITE = LuaScript(r"""
local p = KEYS[1]
local id, expected, body, fenced, node, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local k = p .. 'bot:' .. id
local version = redis.call('HGET', k, 'version') or '0'
if expected ~= '' and version ~= expected then return redis.error_reply('version_conflict') end
if fenced == '1' then
  local lease = redis.call('HMGET', p .. 'lease:' .. id, 'node', 'token')
  if lease[1] then
    if lease[1] ~= node or lease[2] ~= token then return redis.error_reply('fencing_refused') end
  elseif node ~= '' then
    return redis.error_reply('fencing_refused')
  end
  redis.call('HSET', k, 'writer', node)
end
redis.call('HSET', k, 'json', body)
redis.call('ZADD', p .. 'ids', 0, id)
return redis.call('HINCRBY', k, 'version', 1)
""")

_DELETE = LuaScript(r"""
local p, id = KEYS[1], ARGV[1]
redis.call('ZREM', p .. 'ids', id)
return redis.call('DEL', p .. 'bot:' .. id, p .. 'tl:' .. id)
""")

# ARGV: id, entry json, node ('' = unfenced), token, cap.
_APPEND = LuaScript(r"""
local p = KEYS[1]
local id, entry, node, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if node ~= '' then
  local lease = redis.call('HMGET', p .. 'lease:' .. id, 'node', 'token')
  if lease[1] ~= node or lease[2] ~= token then return redis.error_reply('fencing_refused') end
end
local n = redis.call('RPUSH', p .. 'tl:' .. id, entry)
if n > tonumber(ARGV[5]) then redis.call('LTRIM', p .. 'tl:' .. id, n - tonumber(ARGV[5]), -1) end
return n
""")

_TIMELINE = LuaScript(r"""
return redis.call('LRANGE', KEYS[1] .. 'tl:' .. ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
""")


@attrs.frozen
class _Stored:
    record: BotRecord
    version: str
    writer: str


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _node_of(writer: str) -> str:
    # A writer is ``node#run``: the node's name and which run of it wrote.
    return writer.split("#", 1)[0]


def _runner_fields(rec: BotRecord) -> dict[str, Any]:
    return {k: v for k, v in record_to_dict(rec).items() if k not in USER_FIELDS}


def _encode(rec: BotRecord) -> str:
    return json.dumps(record_to_dict(rec), sort_keys=True, default=str)


Fence = Callable[[str], tuple[str, str]]
"""``bot_id -> (node, token)``: who writes (``""`` for a user) and the lease token it holds (``""`` if none)."""


def _user_fence(bot_id: str) -> tuple[str, str]:
    return "", ""


class RedisBotStore:
    """A :class:`~agentrt.bots.BotStore` and :class:`~agentrt.bots.AtomicBotStore` on a shared Redis.

    The plain store writes as a user (the ``agentrt bots`` commands, the web UI).  A supervisor
    node writes through :meth:`fenced`, which carries its leases' tokens and hides process ids
    another node recorded (they belong to another host and must never be signalled here).
    """

    #: A supervisor runs bots from this store only under leases (``open_supervisor`` checks it).
    shared_between_hosts = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        command_timeout: float = 10.0,
        fence: Fence = _user_fence,
        link: RedisLink | None = None,
        node: str = "",
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.command_timeout = command_timeout
        self.node = node
        self._fence = fence
        self._link = link
        self._connecting: trio.Lock | None = None
        self._parent: RedisBotStore | None = None

    def fenced(self, node: str, fence: Fence) -> RedisBotStore:
        """A view of this store (same connection) whose writes carry ``fence(bot_id)``."""
        view = RedisBotStore(self.url, prefix=self.prefix, command_timeout=self.command_timeout, fence=fence, node=node)
        view._parent = self
        return view

    async def link(self) -> RedisLink:
        """The open connection (opened on first use)."""
        if self._parent is not None:
            return await self._parent.link()
        if self._link is not None and not self._link.closed:
            return self._link
        if self._connecting is None:
            self._connecting = trio.Lock()
        async with self._connecting:
            if self._link is None or self._link.closed:
                self._link = await connect_redis(
                    self.url, connect_timeout=self.command_timeout, command_timeout=self.command_timeout
                )
        return self._link

    async def aclose(self) -> None:
        """Close the connection (a fenced view leaves its parent's open)."""
        if self._parent is None and self._link is not None:
            await self._link.aclose()

    async def run(self, script: LuaScript, args: Sequence[str | int | float]) -> Any:
        """Run one of the store's scripts; a script's refusal becomes an :class:`AgentrtError`."""
        link = await self.link()
        try:
            return await link.run(script, keys=[self.prefix], args=args)
        except RedisScriptError as exc:
            if exc.reason == FENCING_REFUSED:
                raise AgentrtError(FENCING_REFUSED, "this node does not hold the bot's lease") from None
            if exc.reason == "version_conflict":
                raise _Conflict() from None
            raise AgentrtError("bot_store_failed", f"redis refused a bot store script: {exc.reason}") from None

    def _decode(self, row: Sequence[Any]) -> _Stored:
        try:
            data = json.loads(_text(row[1]))
            rec = record_from_dict(data)
        except (ValueError, TypeError) as exc:
            raise AgentrtError("bot_store_corrupt", f"bot {_text(row[0])!r} has an unreadable record") from exc
        writer = _text(row[3])
        if self.node and _node_of(writer) != self.node and rec.pid is not None:
            # Recorded on another host: never a process this node may signal.
            rec = attrs.evolve(rec, pid=None, process_started_at=None)
        return _Stored(rec, _text(row[2]), writer)

    async def _read(self, bot_id: str) -> _Stored | None:
        rows = await self.run(_READ, [check_bot_id(bot_id)])
        return self._decode(rows[0]) if rows else None

    async def _write(self, new: BotRecord, current: _Stored | None, *, expected: str) -> None:
        before = current.record if current is not None else BotRecord(bot_id=new.bot_id)
        fenced = _runner_fields(new) != _runner_fields(before)
        body = new
        if not fenced and current is not None and self.node and _node_of(current.writer) != self.node:
            # A user-only change from a node that sees another host's pid hidden: keep that pid.
            raw = await self.run(_READ, [new.bot_id])
            if raw:
                stored = record_from_dict(json.loads(_text(raw[0][1])))
                body = attrs.evolve(stored, desired_state=new.desired_state, config=new.config)
        node, token = self._fence(new.bot_id)
        await self.run(_WRITE, [new.bot_id, expected, _encode(body), "1" if fenced else "0", node, token])

    async def get_bot(self, bot_id: str) -> BotRecord | None:
        """The bot's record, or ``None``."""
        stored = await self._read(bot_id)
        return stored.record if stored is not None else None

    async def save_bot(self, record: BotRecord) -> None:
        """Create or replace the bot's record (fenced when it changes the runner's fields)."""
        check_bot_id(record.bot_id)
        record = attrs.evolve(record, updated_at=time.time())
        for _ in range(_CAS_ATTEMPTS):
            current = await self._read(record.bot_id)
            try:
                await self._write(record, current, expected=current.version if current else "0")
                return
            except _Conflict:
                continue
        raise AgentrtError("bot_store_busy", f"bot {record.bot_id!r} kept changing; try again")

    async def update_bot(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord]
    ) -> tuple[BotRecord, BotRecord] | None:
        """Apply ``change`` atomically (compare-and-set, retried): ``(old, new)``, or ``None`` if unknown."""
        for _ in range(_CAS_ATTEMPTS):
            current = await self._read(bot_id)
            if current is None:
                return None
            new = change(current.record)
            if new is current.record:
                return current.record, new
            new = attrs.evolve(new, updated_at=time.time())
            try:
                await self._write(new, current, expected=current.version)
            except _Conflict:
                continue
            return current.record, new
        raise AgentrtError("bot_store_busy", f"bot {bot_id!r} kept changing; try again")

    async def list_bots(self) -> Sequence[BotRecord]:
        """Every bot, ordered by id."""
        return [self._decode(row).record for row in await self.run(_LIST, [])]

    async def delete_bot(self, bot_id: str) -> None:
        """Forget a bot and its timeline."""
        await self.run(_DELETE, [check_bot_id(bot_id)])

    async def timeline(self, bot_id: str, *, offset: int = 0, limit: int = 100) -> Sequence[Mapping[str, Any]]:
        """The bot's applied lifecycle events, oldest first, paged."""
        rows = await self.run(_TIMELINE, [check_bot_id(bot_id), max(0, offset), max(0, offset) + max(0, limit) - 1])
        out: list[Mapping[str, Any]] = []
        for row in rows if limit > 0 else []:
            try:
                out.append(json.loads(_text(row)))
            except ValueError:
                continue
        return out

    async def append_timeline(self, bot_id: str, entry: Mapping[str, Any]) -> None:
        """Append one applied lifecycle event; a node's append needs the bot's lease (``fencing_refused``)."""
        node, token = self._fence(bot_id)
        payload = json.dumps({**entry, "at": time.time()}, sort_keys=True, default=str)
        await self.run(_APPEND, [check_bot_id(bot_id), payload, node, token, _TIMELINE_CAP])


class _Conflict(Exception):
    """The record changed between the read and the write: read again."""
