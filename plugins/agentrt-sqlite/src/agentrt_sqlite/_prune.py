"""Retention: remove whole recorded conversations, oldest first, by age or to fit a size.

Synchronous, over the store's connection (:meth:`SqliteStore.prune` runs it in
its worker thread).  A conversation goes with its turns, events and approval
decisions; threads stay (a thread is the handle a later run resumes, and its
session id lives on the thread row).  Bot tables are not touched.
"""

from __future__ import annotations

import sqlite3
import time

import attrs

__all__ = ["PruneReport", "RUNNING_GRACE", "prune"]

#: A conversation without an end that started less than this many seconds ago
#: may still be recording: it is never removed (a writer would go on adding
#: events for a conversation that no longer exists).
RUNNING_GRACE = 24 * 3600.0


@attrs.frozen(kw_only=True)
class PruneReport:
    """What :func:`prune` removed, and the database's size in bytes before and after."""

    conversations: int = 0
    turns: int = 0
    events: int = 0
    approvals: int = 0
    first_started: float | None = None
    """When the oldest removed conversation started (None: nothing removed)."""
    last_started: float | None = None
    size_before: int = 0
    size_after: int = 0
    compacted: bool = False
    """The file was compacted (VACUUM) after the removal; false when nothing was removed or it was busy."""


def _used(db: sqlite3.Connection) -> int:
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    return int((pages - free) * db.execute("PRAGMA page_size").fetchone()[0])


def _file_size(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0])


def prune(
    db: sqlite3.Connection, *, max_age_days: float | None = None, max_size_bytes: int | None = None,
    now: float | None = None,
) -> PruneReport:
    """Remove conversations started more than ``max_age_days`` ago, then the oldest until ``max_size_bytes`` fits.

    Oldest first by start time.  The size counted is the database's pages in
    use; after a removal the file is compacted (``VACUUM``), so the file then
    has that size.  A conversation possibly still recording (no end, started
    within :data:`RUNNING_GRACE`) is never removed, so a limit smaller than
    those alone is not reached.
    """
    now = time.time() if now is None else now
    size_before = _file_size(db)
    rows = db.execute(
        "SELECT id, started_at FROM conversations WHERE ended_at IS NOT NULL OR started_at < ?"
        " ORDER BY started_at, rowid",
        (now - RUNNING_GRACE,),
    ).fetchall()
    chosen: list[tuple[str, float]] = []
    if max_age_days is not None:
        cutoff = now - max_age_days * 86400
        chosen = [(cid, started) for cid, started in rows if started < cutoff]
    removed = {"conversations": 0, "turns": 0, "events": 0, "approvals": 0}
    db.execute("BEGIN IMMEDIATE")
    try:
        for cid, _ in chosen:
            _remove(db, cid, removed)
        if max_size_bytes is not None:
            for cid, started in rows[len(chosen):]:
                if _used(db) <= max_size_bytes:
                    break
                _remove(db, cid, removed)
                chosen.append((cid, started))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    compacted = False
    if chosen:
        try:
            db.execute("VACUUM")
            compacted = True
        except sqlite3.OperationalError:
            pass  # busy (a writer or a reader in a long transaction): the freed pages are reused instead
    starts = [started for _, started in chosen]
    return PruneReport(
        **removed, first_started=min(starts, default=None), last_started=max(starts, default=None),
        size_before=size_before, size_after=_file_size(db), compacted=compacted,
    )


def _remove(db: sqlite3.Connection, cid: str, removed: dict[str, int]) -> None:
    removed["events"] += db.execute("DELETE FROM events WHERE source = ?", (cid,)).rowcount
    removed["approvals"] += db.execute("DELETE FROM approvals WHERE conversation_id = ?", (cid,)).rowcount
    removed["turns"] += db.execute("DELETE FROM turns WHERE conversation_id = ?", (cid,)).rowcount
    removed["conversations"] += db.execute("DELETE FROM conversations WHERE id = ?", (cid,)).rowcount
