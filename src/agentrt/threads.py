"""Named threads: a conversation that outlives one agent process.

A thread remembers the native session id the agent reported, so the next
process for that thread gets ``--resume <id>``.  The store itself is provided
by a plugin (``agentrt_thread_store``); the database plugin is the built-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from .events import Diagnostic

__all__ = [
    "ThreadRecord", "ThreadStore", "ThreadSummary", "ThreadBrowser", "TURN_FIELDS",
    "ThreadHistory", "ApprovalLog", "ConversationLog", "ThreadRenamer", "AsyncClosable",
    "ReplyParts",
]


@attrs.frozen(kw_only=True)
class ThreadRecord:
    """What a thread remembers between processes."""

    name: str
    dialect: str
    executable: str
    model: str | None = None
    session_id: str | None = None
    agent: str | None = None
    """The configured agent the thread talks to (``[agents.NAME]``); ``None``: the front end's default.

    Saving a record whose ``agent`` is ``None`` keeps the one stored (a front end that does not know it
    does not forget it)."""


class ThreadStore(Protocol):
    """Looks threads up and records their session ids (all methods are async)."""

    async def get_thread(self, name: str) -> ThreadRecord | None:
        """The thread called ``name``, or ``None``."""
        ...

    async def save_thread(self, record: ThreadRecord) -> None:
        """Create or update a thread."""
        ...


@attrs.frozen(kw_only=True)
class ThreadSummary:
    """One thread in a listing: its record, when it was created and last updated, how many turns it has."""

    record: ThreadRecord
    created_at: float
    """Unix time."""
    updated_at: float
    """Unix time of the last change (a new session id, a renamed model)."""
    turns: int


#: The keys of each mapping :meth:`ThreadBrowser.thread_turns` returns.
TURN_FIELDS = (
    "conversation_id",
    "turn",
    "prompt",
    "reply",
    "outcome",
    "code",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "started_at",
    "duration",
)


@runtime_checkable
class ThreadBrowser(Protocol):
    """What a thread store may offer besides :class:`ThreadStore`: listing, history, deletion.

    Optional: the terminal chat needs only :class:`ThreadStore`; the web UI lists
    and deletes threads when the store is also a ``ThreadBrowser`` (checked with
    ``isinstance``), and shows none otherwise.  The database plugin's store is one.
    """

    async def list_threads(self) -> Sequence[ThreadSummary]:
        """Every thread, most recently updated first."""
        ...

    async def thread_turns(self, name: str, limit: int | None = None) -> Sequence[Mapping[str, Any]]:
        """The thread's turns, oldest first (at most ``limit``), each with the keys :data:`TURN_FIELDS`.

        ``outcome`` is ``"completed"``, ``"failed"`` or ``None`` (still running or cut
        off); ``code`` the failure's code; token counts may be ``None``; ``started_at``
        is Unix time and ``duration`` seconds.
        """
        ...

    async def delete_thread(self, name: str) -> bool:
        """Forget the thread and what was recorded of it; ``False`` if there was none."""
        ...

    async def check_thread(self, name: str) -> tuple[ThreadRecord | None, Diagnostic | None]:
        """The thread (or ``None``) and, when its stored session id cannot be resumed, a diagnostic saying why."""
        ...


@runtime_checkable
class ReplyParts(Protocol):
    """A store that reads long replies in parts (checked with ``isinstance``).

    The web UI shows a reply's first part on the thread page and a page per further
    part; without it replies are shown whole.  The database plugin's store is one.
    """

    async def thread_turns(
        self, name: str, limit: int | None = None, *, reply_chars: int | None = None
    ) -> Sequence[Mapping[str, Any]]:
        """As :meth:`ThreadBrowser.thread_turns`, each ``reply`` cut to ``reply_chars`` characters.

        With ``reply_chars``, each turn also has ``reply_more``: whether the reply goes on.
        """
        ...

    async def reply_part(
        self, name: str, conversation_id: str, turn: int, offset: int, size: int
    ) -> tuple[str, bool] | None:
        """Characters ``offset`` to ``offset + size`` of a turn's reply and whether more follow.

        ``None`` when the thread ``name`` has no such turn.
        """
        ...


@runtime_checkable
class ThreadHistory(Protocol):
    """A store that replays a thread's recorded events (checked with ``isinstance``).

    The bridge replays a loaded session from it and the web UI shows stored tool steps
    and failure messages; without it neither is shown.  The database plugin's store is one.
    """

    async def thread_events(self, name: str, *, after: int = 0,
                            limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
        """A page of the thread's event envelopes, in order, and the cursor to pass as ``after`` next.

        The page comes back empty when there are no more.
        """
        ...


@runtime_checkable
class ApprovalLog(Protocol):
    """A store that records tool-approval decisions (checked with ``isinstance``); without it none are kept."""

    async def record_approval(self, decision: Any) -> None:
        """Store one decision (an :class:`agentrt.approval.ApprovalDecision`)."""
        ...


@runtime_checkable
class ConversationLog(Protocol):
    """A store that finds the newest conversation, what ``agentrt run -c`` continues (checked with ``isinstance``)."""

    async def latest_conversation(self, agent: str | None = None) -> Mapping[str, Any] | None:
        """The newest conversation with a native session id (of ``agent`` if given), or ``None``."""
        ...


@runtime_checkable
class ThreadRenamer(Protocol):
    """A store that renames threads (checked with ``isinstance``); the web UI offers renaming only then."""

    async def rename_thread(self, old: str, new: str) -> bool:
        """Give thread ``old`` the name ``new`` (its history follows); ``False`` if ``old`` is unknown."""
        ...


@runtime_checkable
class AsyncClosable(Protocol):
    """A store holding a resource (a connection) to release; front ends ``await aclose()`` when done with it."""

    async def aclose(self) -> None:
        """Release what the store holds; idempotent."""
        ...
