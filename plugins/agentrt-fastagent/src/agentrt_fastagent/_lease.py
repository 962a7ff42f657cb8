"""Bot leases on Redis: which node of a shared deployment may run which bot.

Each bot runs on at most one node.  A node *claims* a bot's lease (``lease:<id>`` in the
Redis bot store: the holder and a fencing token, expiring after ``ttl`` seconds on the
server's clock), *renews* all its leases in one script every ``ttl / 3`` seconds, and
*releases* a lease once the bot's process is gone and nobody wants it to run.  The token
is the bot's own counter (``INCR token:<id>``), so every claim gets a larger one; every
write the node makes to the bot's record carries it (:meth:`RedisBotStore.fenced`) and the
store's scripts refuse a stale one (``fencing_refused``).

Safety does not depend on the renewals arriving: the node measures, on its own monotonic
clock, the time since it *sent* the last renewal the server acknowledged (the server's
expiry is at least that moment plus ``ttl``).  ``stop_budget`` seconds before that bound the
node stops the bot itself (the bounded SIGTERM/SIGKILL of the process, without waiting for
Redis), so a partitioned node has stopped its bots before any other node can claim them.
A free or expired lease is claimed by a live node at its next pass (every ``ttl / 3``).

Placement is bounded: a node holds at most ``max_bots`` leases and claims no more than its
share (bots that want to run divided by live nodes, rounded up); running bots are never
moved to even out the load.
"""

from __future__ import annotations

import math
import random
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError
from agentrt.events import EventBatch
from agentrt.redislink import LuaScript
from agentrt.sinks import Sink

from ._redis_store import RedisBotStore
from ._store import TimelineSink
from ._supervisor import Resolver, Supervisor, SupervisorConfig, open_supervisor

__all__ = ["LeaseConfig", "LeaseKeeper", "open_shared_supervisor"]

# ARGV: id, holder, ttl_ms.  Returns the new token, or 0 when another holder has it.
_CLAIM = LuaScript(r"""
local p = KEYS[1]
local lk = p .. 'lease:' .. ARGV[1]
if redis.call('EXISTS', lk) == 1 then return 0 end
local token = redis.call('INCR', p .. 'token:' .. ARGV[1])
redis.call('HSET', lk, 'node', ARGV[2], 'token', token)
redis.call('PEXPIRE', lk, tonumber(ARGV[3]))
return token
""")

# ARGV: holder, ttl_ms, then (id, token) pairs.  Records the holder's heartbeat; returns
# {live nodes, {1 if the pair's lease was renewed else 0, ...}}.
_RENEW = LuaScript(r"""
local p = KEYS[1]
local holder, ttl = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', p .. 'nodes', '-inf', now)
redis.call('ZADD', p .. 'nodes', now + ttl, holder)
local out = {}
for i = 3, #ARGV, 2 do
  local lk = p .. 'lease:' .. ARGV[i]
  local cur = redis.call('HMGET', lk, 'node', 'token')
  if cur[1] == holder and cur[2] == ARGV[i + 1] then
    redis.call('PEXPIRE', lk, ttl)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return {redis.call('ZCARD', p .. 'nodes'), out}
""")

# ARGV: holder, leave ('1' also drops the heartbeat), then (id, token) pairs.
_RELEASE = LuaScript(r"""
local p = KEYS[1]
local holder = ARGV[1]
local n = 0
for i = 3, #ARGV, 2 do
  local lk = p .. 'lease:' .. ARGV[i]
  local cur = redis.call('HMGET', lk, 'node', 'token')
  if cur[1] == holder and cur[2] == ARGV[i + 1] then
    redis.call('DEL', lk)
    n = n + 1
  end
end
if ARGV[2] == '1' then redis.call('ZREM', p .. 'nodes', holder) end
return n
""")


@attrs.frozen(kw_only=True)
class LeaseConfig:
    """One node's lease settings (durations in seconds)."""

    node: str
    ttl: float = 15.0
    max_bots: int | None = None
    stop_budget: float = 6.0
    """How long stopping a bot may take (the SIGTERM grace, the reap, a margin)."""

    def __attrs_post_init__(self) -> None:
        if not self.node or "#" in self.node or len(self.node) > 200 or not self.node.isprintable():
            raise AgentrtError("invalid_node_name", "a node name is 1-200 printable characters without '#'")
        if not (math.isfinite(self.ttl) and self.ttl > 0):
            raise AgentrtError("invalid_lease_ttl", "the lease TTL must be a positive number of seconds")
        if self.max_bots is not None and self.max_bots < 0:
            raise AgentrtError("invalid_max_bots", "--max-bots must be 0 or more")
        # After a renewal the next one is due at ttl/3; the node must still have time to retry
        # before it has to begin stopping (ttl - stop_budget after the renewal).
        if self.ttl - self.stop_budget <= self.ttl / 3:
            need = math.ceil(self.stop_budget * 1.5 + 0.5)
            raise AgentrtError(
                "lease_ttl_too_short",
                f"the lease TTL ({self.ttl:g}s) must exceed 1.5 x the bot stop time ({self.stop_budget:g}s): "
                f"use at least {need}s",
            )

    @property
    def renew_interval(self) -> float:
        """Seconds between renewals (a third of the TTL)."""
        return self.ttl / 3

    @property
    def call_timeout(self) -> float:
        """The bound on one Redis command of a node (a late answer is treated as no answer)."""
        return self.ttl / 6


@attrs.define
class _Held:
    token: str
    confirmed: float  # trio clock when the last acknowledged claim/renewal was *sent*


def wants_a_node(rec: BotRecord) -> bool:
    """Whether the bot needs a process somewhere (a one-shot request, or running and not failed)."""
    if rec.desired_state in ("restart", "reissue_qr"):
        return True
    return rec.desired_state == "running" and rec.status != "failed"


class LeaseKeeper:
    """Claims, renews and releases one node's leases; the supervisor asks it where it may run bots."""

    def __init__(self, store: RedisBotStore, config: LeaseConfig) -> None:
        self.store = store
        self.config = config
        #: This run of the node: a restarted node waits for its old leases to expire like anyone.
        self.holder = f"{config.node}#{uuid.uuid4().hex[:12]}"
        self.held: dict[str, _Held] = {}
        #: Leases this node gave up unasked: bot -> when their last acknowledged renewal was sent.
        self.lost: dict[str, float] = {}
        self.live_nodes = 1
        self.closing = False
        self._supervisor: Supervisor | None = None
        self._changed = trio.Event()

    # -- what the supervisor and the store ask --------------------------------

    def may_run(self, bot_id: str) -> bool:
        """Whether this node holds the bot's lease with time left to run it."""
        held = self.held.get(bot_id)
        return held is not None and not self.closing and trio.current_time() < self._deadline(held)

    def fence(self, bot_id: str) -> tuple[str, str]:
        """The holder and token this node's writes to ``bot_id`` carry (no token without the lease)."""
        held = self.held.get(bot_id)
        return self.holder, held.token if held is not None else ""

    def _deadline(self, held: _Held) -> float:
        return held.confirmed + self.config.ttl - self.config.stop_budget

    # -- the loops ------------------------------------------------------------

    async def run(self, supervisor: Supervisor) -> None:
        """Renew, claim and release every ``ttl / 3`` seconds, and stop bots whose lease runs out."""
        self._supervisor = supervisor
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watchdog)
            while True:
                try:
                    await self.tick()
                except AgentrtError as exc:
                    print(f"agentrt: leases: {exc.code}: {exc.detail}", file=sys.stderr)
                await trio.sleep(self.config.renew_interval)

    async def tick(self) -> None:
        """One pass: renew what is held, then (unless closing) claim and release."""
        await self._renew()
        if not self.closing:
            await self._place()

    async def _call(self, script: LuaScript, args: Sequence[str | int | float]) -> Any:
        # The store's own command timeout (call_timeout for a node) normally answers first; this
        # outer bound only guards against a call that never returns.
        with trio.move_on_after(self.config.call_timeout * 2 + 1):
            return await self.store.run(script, args)
        raise AgentrtError("redis_unavailable", "redis did not answer a lease call in time")

    async def _renew(self) -> None:
        sent = trio.current_time()
        pairs = list(self.held.items())
        args: list[str | int | float] = [self.holder, int(self.config.ttl * 1000)]
        for bot_id, held in pairs:
            args += [bot_id, held.token]
        live, flags = await self._call(_RENEW, args)
        self.live_nodes = max(1, int(live))
        for (bot_id, held), ok in zip(pairs, flags, strict=True):
            if self.held.get(bot_id) is not held:
                continue
            if int(ok):
                held.confirmed = sent
            else:
                self._lose(bot_id, "lease taken or expired")

    async def _place(self) -> None:
        records = await self.store.list_bots()
        wanted = [r.bot_id for r in records if wants_a_node(r)]
        live = set(self._supervisor.live_bots()) if self._supervisor is not None else set()
        for bot_id, held in list(self.held.items()):
            if bot_id not in wanted and bot_id not in live:
                await self._call(_RELEASE, [self.holder, "0", bot_id, held.token])
                self.held.pop(bot_id, None)
        share = math.ceil(len(wanted) / self.live_nodes)
        limit = share if self.config.max_bots is None else min(share, self.config.max_bots)
        free = [b for b in wanted if b not in self.held]
        random.shuffle(free)  # nodes racing for the same bots start at different ones
        for bot_id in free:
            if len(self.held) >= limit:
                break
            sent = trio.current_time()
            token = int(await self._call(_CLAIM, [bot_id, self.holder, int(self.config.ttl * 1000)]))
            if token:
                self.held[bot_id] = _Held(token=str(token), confirmed=sent)
                self._changed.set()
                if self._supervisor is not None:
                    self._supervisor.wake()

    async def _watchdog(self) -> None:
        while True:
            now = trio.current_time()
            for bot_id, held in list(self.held.items()):
                if now >= self._deadline(held):
                    self._lose(bot_id, "lease not renewed in time")
            deadlines = [self._deadline(h) for h in self.held.values()]
            self._changed = trio.Event()
            with trio.move_on_at(min(deadlines, default=now + self.config.renew_interval)):
                await self._changed.wait()

    def _lose(self, bot_id: str, why: str) -> None:
        held = self.held.pop(bot_id, None)
        if held is not None:
            self.lost[bot_id] = held.confirmed
        self._changed.set()
        if self._supervisor is not None and bot_id in self._supervisor.live_bots():
            print(f"agentrt: bot {bot_id}: {why}: stopping it here", file=sys.stderr)
            self._supervisor.evict(bot_id)

    async def release_all(self) -> None:
        """Give every lease back and leave the node set (after the bots have stopped)."""
        args: list[str | int | float] = [self.holder, "1"]
        for bot_id, held in self.held.items():
            args += [bot_id, held.token]
        self.held.clear()
        self._changed.set()
        with trio.CancelScope(shield=True):
            try:
                await self._call(_RELEASE, args)
            except AgentrtError:
                pass  # unreachable: the leases expire on their own


class _SharedTimelineSink(TimelineSink):
    """The timeline in Redis: an entry refused (a stale node's) or undeliverable is dropped, the sink stays."""

    policy: Literal["block", "coalesce"] = "block"

    async def handle(self, batch: EventBatch) -> None:
        """Append the batch's lifecycle events, dropping what the store refuses."""
        try:
            await super().handle(batch)
        except AgentrtError as exc:
            # A sink that raises is detached for good: one refused entry must not end the timeline.
            print(f"agentrt: bot {batch.source}: timeline entry dropped: {exc.code}", file=sys.stderr)


@asynccontextmanager
async def open_shared_supervisor(
    store: RedisBotStore,
    lease: LeaseConfig,
    *,
    config: SupervisorConfig,
    resolve: Resolver,
    sinks: Sequence[Sink] = (),
) -> AsyncIterator[tuple[Supervisor, LeaseKeeper]]:
    """Run a supervisor that shares the bots in ``store`` with other nodes through leases.

    The bots' timelines go to ``store`` too (through the node's fenced view, so a stale
    node's entries are refused).  On exit: no more claims, the bots here stop (their leases
    are still renewed meanwhile), then the leases are released so other nodes take the bots
    at once.
    """
    keeper = LeaseKeeper(store, lease)
    fenced = store.fenced(lease.node, keeper.fence)
    sinks = [*sinks, _SharedTimelineSink(fenced)]
    async with trio.open_nursery() as nursery:
        async with open_supervisor(fenced, config=config, resolve=resolve, sinks=sinks, placement=keeper) as sup:
            nursery.start_soon(keeper.run, sup)
            try:
                yield sup, keeper
            finally:
                keeper.closing = True
        await keeper.release_all()
        nursery.cancel_scope.cancel()
