"""Supervised bot instances (FastAgent weixin bots): their persisted record.

The supervisor (the FastAgent plugin) keeps each bot's desired state, status,
process id and start time, restart count and backoff in a :class:`BotStore`,
provided by a plugin (``agentrt_bot_store``; the database plugin is the
built-in).  Lifecycle and state-change events travel to sinks like any other
event, with the bot id as the batch ``source``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = ["BotRecord", "BotStore", "AtomicBotStore", "SharedBotStore", "QrReissuer"]


@attrs.frozen(kw_only=True)
class BotRecord:
    """Everything the supervisor must remember about one bot across restarts."""

    bot_id: str
    desired_state: str = "stopped"
    status: str = "stopped"
    pid: int | None = None
    process_started_at: str | None = None
    restart_count: int = 0
    backoff_until: float | None = None
    last_error_code: str | None = None
    last_error_message: str | None = None
    last_qr_code_url: str | None = None
    last_qr_code_id: str | None = None
    account_id: str | None = None
    config: Mapping[str, Any] = attrs.field(factory=dict)
    updated_at: float | None = None
    model: str | None = None
    """The model of the LLM profile the bot was last started with: a snapshot, kept when the profile changes."""


class BotStore(Protocol):
    """Persistence of bot records and their event timeline (all methods async)."""

    async def get_bot(self, bot_id: str) -> BotRecord | None:
        """The bot's record, or ``None``."""
        ...

    async def save_bot(self, record: BotRecord) -> None:
        """Create or replace the bot's record."""
        ...

    async def list_bots(self) -> Sequence[BotRecord]:
        """Every bot, ordered by id."""
        ...

    async def delete_bot(self, bot_id: str) -> None:
        """Forget a bot and its timeline."""
        ...

    async def timeline(
        self, bot_id: str, *, offset: int = 0, limit: int = 100
    ) -> Sequence[Mapping[str, Any]]:
        """The bot's applied lifecycle events, oldest first, paged."""
        ...


@runtime_checkable
class AtomicBotStore(Protocol):
    """A bot store that can change a record atomically (the supervisor and the CLI both write records).

    Optional: without it the writers read, change and save, re-reading just
    before the save, which narrows the race without closing it.  Both built-in
    stores (the FastAgent JSON files, the database) have it.
    """

    async def update_bot(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord]
    ) -> tuple[BotRecord, BotRecord] | None:
        """Apply ``change`` to the stored record atomically: ``(old, new)``, or ``None`` if there is none.

        ``change`` must be quick and pure (it may run in another thread, with a lock
        held); returning the record it was given unchanged writes nothing.
        """
        ...


@runtime_checkable
class SharedBotStore(Protocol):
    """A bot store that several hosts may share (checked with ``isinstance``, then the flag read).

    When ``shared_between_hosts`` is true a supervisor runs its bots only under
    placement leases (``placement_required`` otherwise), since without them every
    host would run every bot.  The Redis store is one; the JSON files and the database are not.
    """

    @property
    def shared_between_hosts(self) -> bool:
        """Whether other hosts may run bots from this store."""
        ...


@runtime_checkable
class QrReissuer(Protocol):
    """A supervisor that reissues a bot's login QR code as one request (checked with ``isinstance``).

    The web UI's "reissue QR" asks it when it has one; otherwise it does the steps itself
    (stop the bot, forget its login, start it).  The FastAgent supervisor is one.
    """

    async def request_qr_reissue(self, bot_id: str) -> None:
        """Stop the bot, forget its login state and start it again, so a fresh QR code is issued."""
        ...
