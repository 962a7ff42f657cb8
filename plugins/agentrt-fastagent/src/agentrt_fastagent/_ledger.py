"""The bots' ledger: every record change and every event of one supervisor goes through it.

:meth:`BotLedger.update` is the one read-modify-write of a bot's record
(serialized per bot, atomic when the store is an
:class:`~agentrt.bots.AtomicBotStore`, never writing back a stale desired
state otherwise); :meth:`BotLedger.emit` numbers a bot's events and sends
them out as one :class:`~agentrt.events.EventBatch`.  The bot runs and the
reconciler share one ledger; neither holds the other.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from agentrt.bots import AtomicBotStore, BotRecord, BotStore
from agentrt.errors import AgentrtError
from agentrt.events import Event, EventBatch, StateChanged

from ._transitions import reason

__all__ = ["BotLedger"]


class BotLedger:
    """A store's records and a sink's batches, per bot, in order."""

    def __init__(self, store: BotStore, send: Callable[[EventBatch], Awaitable[None]]) -> None:
        self.store = store
        self._send = send
        self._locks: dict[str, trio.Lock] = {}
        self._seq: dict[str, int] = {}

    def _lock(self, bot_id: str) -> trio.Lock:
        lock = self._locks.get(bot_id)
        if lock is None:
            lock = self._locks[bot_id] = trio.Lock()
        return lock

    async def update(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord], events: Sequence[Event] = ()
    ) -> BotRecord:
        """Read-modify-write of one record (serialized per bot); ``unknown_bot`` if it is gone.

        Once saved, ``events`` and the resulting state change (if any) go out in one batch.
        """
        async with self._lock(bot_id):
            if isinstance(self.store, AtomicBotStore):
                pair = await self.store.update_bot(bot_id, change)
                if pair is None:
                    raise AgentrtError("unknown_bot", f"no bot named {bot_id!r}")
                rec, new = pair
            else:
                got = await self.store.get_bot(bot_id)
                if got is None:
                    raise AgentrtError("unknown_bot", f"no bot named {bot_id!r}")
                rec = got
                new = change(rec)
                if new is not rec:
                    if new.desired_state == rec.desired_state:
                        # Another process (the CLI) may have changed the desired state
                        # since we read it: never write back a stale one.
                        fresh = await self.store.get_bot(bot_id)
                        if fresh is not None and fresh.desired_state != rec.desired_state:
                            new = attrs.evolve(new, desired_state=fresh.desired_state)
                    await self.store.save_bot(new)
        out = list(events)
        if new.status != rec.status:
            out.append(StateChanged(state=new.status, previous=rec.status, reason=reason(new)))
        await self.emit(bot_id, out)
        return new

    async def emit(self, bot_id: str, events: Sequence[Event]) -> None:
        """Send ``events`` as the bot's next batch (numbered after its previous ones); none: nothing."""
        if not events:
            return
        seq = self._seq.get(bot_id, 0)
        self._seq[bot_id] = seq + len(events)
        batch = EventBatch(
            source=bot_id, first_seq=seq, mono=trio.current_time(), wall=time.time(), events=tuple(events)
        )
        await self._send(batch)
