"""Retention: remove whole recorded conversations, oldest first, by age or to fit a size.

Synchronous, over the store's connection (:meth:`SqliteStore.prune` runs it in
its worker thread).  A conversation goes with its turns, events, approval
decisions and transcript file; threads stay (a thread is the handle a later run resumes, and its
session id lives on the thread row).  Bot tables are not touched.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import attrs

from ._reading import database_file, transcript_of
from ._transcript import transcript_dir

__all__ = ["PruneReport", "RUNNING_GRACE", "prune"]

#: A conversation without an end that started less than this many seconds ago
#: may still be recording: it is never removed (a writer would go on adding
#: events for a conversation that no longer exists).
RUNNING_GRACE = 24 * 3600.0


@attrs.frozen(kw_only=True)
class PruneReport:
    """What :func:`prune` removed, and the size in bytes of the database and its transcripts before and after."""

    conversations: int = 0
    turns: int = 0
    events: int = 0
    """Rows of ``events`` (conversations recorded before transcripts)."""
    transcripts: int = 0
    """Transcript files removed."""
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


def _transcript_size(path: Path | None) -> int:
    try:
        return 0 if path is None else path.stat().st_size
    except OSError:
        return 0


def _orphans(db: sqlite3.Connection, named: set[Path], now: float) -> int:
    """Remove transcript files no conversation row names, untouched for :data:`RUNNING_GRACE`; how many.

    Such a file is left by a run killed before its first index commit (its
    first 20 ms); one written to recently may belong to a run that is just
    starting, so it stays.
    """
    directory = transcript_dir(database_file(db))
    try:
        candidates = [p for p in directory.glob("*.atr") if p not in named]
    except OSError:
        return 0
    known = {r[0] for r in db.execute("SELECT transcript FROM conversations WHERE transcript IS NOT NULL")}
    count = 0
    for path in candidates:
        try:
            if path.name in known or path.stat().st_mtime > now - RUNNING_GRACE:
                continue
            path.unlink()
        except OSError:
            continue
        count += 1
    return count


def _transcripts(db: sqlite3.Connection) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for (cid,) in db.execute("SELECT id FROM conversations WHERE transcript IS NOT NULL").fetchall():
        path = transcript_of(db, cid)
        if path is not None:
            out[cid] = path
    return out


def prune(
    db: sqlite3.Connection, *, max_age_days: float | None = None, max_size_bytes: int | None = None,
    now: float | None = None,
) -> PruneReport:
    """Remove conversations started more than ``max_age_days`` ago, then the oldest until ``max_size_bytes`` fits.

    Oldest first by start time.  The size counted is the database's pages in
    use and the transcript files; after a removal the database is compacted
    (``VACUUM``), so the file then has that size.  Transcript files go after
    the rows that name them are gone (a crash between leaves a file no row
    names, never a row without its file).  A transcript no row names (a run
    killed within its first commit interval) goes once untouched for
    :data:`RUNNING_GRACE`.  A conversation possibly still recording (no end, started
    within :data:`RUNNING_GRACE`) is never removed, so a limit smaller than
    those alone is not reached.
    """
    now = time.time() if now is None else now
    files = _transcripts(db)
    sizes = {cid: _transcript_size(path) for cid, path in files.items()}
    on_disk = sum(sizes.values())
    size_before = _file_size(db) + on_disk
    rows = db.execute(
        "SELECT id, started_at FROM conversations WHERE ended_at IS NOT NULL OR started_at < ?"
        " ORDER BY started_at, rowid",
        (now - RUNNING_GRACE,),
    ).fetchall()
    chosen: list[tuple[str, float]] = []
    if max_age_days is not None:
        cutoff = now - max_age_days * 86400
        chosen = [(cid, started) for cid, started in rows if started < cutoff]
    removed = {"conversations": 0, "turns": 0, "events": 0, "transcripts": 0, "approvals": 0}
    db.execute("BEGIN IMMEDIATE")
    try:
        for cid, _ in chosen:
            _remove(db, cid, removed)
        if max_size_bytes is not None:
            on_disk -= sum(sizes.get(cid, 0) for cid, _ in chosen)
            for cid, started in rows[len(chosen):]:
                if _used(db) + on_disk <= max_size_bytes:
                    break
                _remove(db, cid, removed)
                on_disk -= sizes.get(cid, 0)
                chosen.append((cid, started))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    for cid, _ in chosen:
        if cid in files:
            files.pop(cid).unlink(missing_ok=True)
            removed["transcripts"] += 1
    removed["transcripts"] += _orphans(db, set(files.values()), now)
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
        size_before=size_before, size_after=_file_size(db) + sum(_transcript_size(p) for p in files.values()),
        compacted=compacted,
    )


def _remove(db: sqlite3.Connection, cid: str, removed: dict[str, int]) -> None:
    removed["events"] += db.execute("DELETE FROM events WHERE source = ?", (cid,)).rowcount
    removed["approvals"] += db.execute("DELETE FROM approvals WHERE conversation_id = ?", (cid,)).rowcount
    removed["turns"] += db.execute("DELETE FROM turns WHERE conversation_id = ?", (cid,)).rowcount
    removed["conversations"] += db.execute("DELETE FROM conversations WHERE id = ?", (cid,)).rowcount
