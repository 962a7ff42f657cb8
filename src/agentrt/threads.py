"""Named threads: a conversation that outlives one agent process.

A thread remembers the native session id the agent reported, so the next
process for that thread gets ``--resume <id>``.  The store itself is provided
by a plugin (``agentrt_thread_store``); the database plugin is the built-in.
"""

from __future__ import annotations

from typing import Protocol

import attrs

__all__ = ["ThreadRecord", "ThreadStore"]


@attrs.frozen(kw_only=True)
class ThreadRecord:
    """What a thread remembers between processes."""

    name: str
    dialect: str
    executable: str
    model: str | None = None
    session_id: str | None = None


class ThreadStore(Protocol):
    """Looks threads up and records their session ids (all methods are async)."""

    async def get_thread(self, name: str) -> ThreadRecord | None:
        """The thread called ``name``, or ``None``."""
        ...

    async def save_thread(self, record: ThreadRecord) -> None:
        """Create or update a thread."""
        ...
