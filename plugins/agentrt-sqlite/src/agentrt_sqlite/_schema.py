"""The database schema and its numbered migrations (``PRAGMA user_version``).

Migration ``n`` takes a database at version ``n - 1`` to version ``n``.  Each
runs in its own transaction together with the ``user_version`` bump, so a
crash mid-upgrade leaves the previous version intact.  Never edit a released
migration: add the next one.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrt.errors import AgentrtError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "connect", "migrate"]


class _Tx:
    """Runs a migration's statements one by one inside the caller's transaction.

    ``sqlite3.executescript`` would COMMIT first; splitting keeps DDL and the
    version bump atomic.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement, with parameters (for data migrations)."""
        return self._db.execute(sql, params)

    def executescript(self, script: str) -> None:
        """Statements separated by ``;`` (no ``;`` inside literals), run in order."""
        for statement in script.split(";"):
            if statement.strip():
                self._db.execute(statement)


def _v1(db: _Tx) -> None:
    db.executescript(
        """
        CREATE TABLE threads (
            id          INTEGER PRIMARY KEY,
            name        TEXT NOT NULL UNIQUE,
            dialect     TEXT NOT NULL,
            executable  TEXT NOT NULL,
            model       TEXT,
            session_id  TEXT,
            created_at  REAL NOT NULL,
            updated_at  REAL NOT NULL
        );
        CREATE TABLE conversations (
            id          TEXT PRIMARY KEY,
            thread_id   INTEGER REFERENCES threads(id) ON DELETE CASCADE,
            dialect     TEXT,
            executable  TEXT,
            model       TEXT,
            session_id  TEXT,
            started_at  REAL NOT NULL,
            ended_at    REAL,
            returncode  INTEGER,
            signal      INTEGER
        );
        CREATE INDEX conversations_thread ON conversations(thread_id);
        CREATE TABLE turns (
            id              INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            turn            INTEGER NOT NULL,
            prompt          TEXT NOT NULL,
            reply           TEXT,
            outcome         TEXT NOT NULL DEFAULT 'running',
            code            TEXT,
            input_tokens    INTEGER,
            output_tokens   INTEGER,
            cache_read_input_tokens     INTEGER,
            cache_creation_input_tokens INTEGER,
            started_at      REAL NOT NULL,
            duration        REAL
        );
        CREATE INDEX turns_conversation ON turns(conversation_id);
        CREATE TABLE events (
            id      INTEGER PRIMARY KEY,
            source  TEXT NOT NULL,
            seq     INTEGER NOT NULL,
            mono    REAL NOT NULL,
            wall    REAL NOT NULL,
            type    TEXT NOT NULL,
            data    TEXT NOT NULL
        );
        CREATE INDEX events_source_seq ON events(source, seq);
        """
    )


def _v2(db: _Tx) -> None:
    db.executescript(
        """
        CREATE TABLE bots (
            bot_id              TEXT PRIMARY KEY,
            desired_state       TEXT NOT NULL,
            status              TEXT NOT NULL,
            pid                 INTEGER,
            process_started_at  TEXT,
            restart_count       INTEGER NOT NULL DEFAULT 0,
            backoff_until       REAL,
            last_error_code     TEXT,
            last_error_message  TEXT,
            last_qr_code_url    TEXT,
            last_qr_code_id     TEXT,
            account_id          TEXT,
            config              TEXT NOT NULL DEFAULT '{}',
            updated_at          REAL
        );
        CREATE TABLE bot_state_history (
            id        INTEGER PRIMARY KEY,
            bot_id    TEXT NOT NULL,
            state     TEXT NOT NULL,
            previous  TEXT,
            reason    TEXT NOT NULL DEFAULT '',
            at        REAL NOT NULL
        );
        CREATE INDEX bot_state_history_bot ON bot_state_history(bot_id, id);
        CREATE TABLE bot_timeline (
            id       INTEGER PRIMARY KEY,
            bot_id   TEXT NOT NULL,
            type     TEXT NOT NULL,
            message  TEXT NOT NULL DEFAULT '',
            payload  TEXT NOT NULL,
            at       REAL NOT NULL
        );
        CREATE INDEX bot_timeline_bot ON bot_timeline(bot_id, id);
        """
    )


def _v3(db: _Tx) -> None:
    # The model snapshot a bot was last started with (BotRecord.model).
    db.execute("ALTER TABLE bots ADD COLUMN model TEXT")


def _v4(db: _Tx) -> None:
    # Logs: which configured agent a conversation ran (``-a NAME``), which one
    # it continues (``run -c``), and full-text search over prompts and replies.
    db.execute("ALTER TABLE conversations ADD COLUMN agent TEXT")
    db.execute("ALTER TABLE conversations ADD COLUMN continues TEXT")
    db.execute("CREATE INDEX conversations_started ON conversations(started_at)")
    db.execute("CREATE INDEX turns_started ON turns(started_at)")
    # An external-content index: the text lives once, in ``turns``; triggers
    # keep the index in step (a reply is written when its turn ends).
    db.execute("CREATE VIRTUAL TABLE turns_fts USING fts5(prompt, reply, content='turns', content_rowid='id')")
    db.execute(
        "CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN"
        " INSERT INTO turns_fts(rowid, prompt, reply) VALUES (new.id, new.prompt, new.reply); END"
    )
    db.execute(
        "CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN"
        " INSERT INTO turns_fts(turns_fts, rowid, prompt, reply) VALUES ('delete', old.id, old.prompt, old.reply);"
        " END"
    )
    db.execute(
        "CREATE TRIGGER turns_fts_update AFTER UPDATE OF prompt, reply ON turns BEGIN"
        " INSERT INTO turns_fts(turns_fts, rowid, prompt, reply) VALUES ('delete', old.id, old.prompt, old.reply);"
        " INSERT INTO turns_fts(rowid, prompt, reply) VALUES (new.id, new.prompt, new.reply); END"
    )
    # Turns recorded before this version become searchable too.
    db.execute("INSERT INTO turns_fts(turns_fts) VALUES ('rebuild')")


def _v5(db: _Tx) -> None:
    # Tool approvals: every allow/deny decision, with the rule or person that made it.
    # No foreign key: a decision can be recorded before its conversation's first row.
    db.executescript(
        """
        CREATE TABLE approvals (
            id              INTEGER PRIMARY KEY,
            conversation_id TEXT,
            thread          TEXT,
            tool            TEXT NOT NULL,
            summary         TEXT NOT NULL DEFAULT '',
            decision        TEXT NOT NULL,
            by              TEXT NOT NULL,
            at              REAL NOT NULL
        );
        CREATE INDEX approvals_at ON approvals(at);
        CREATE INDEX approvals_conversation ON approvals(conversation_id)
        """
    )


def _v6(db: _Tx) -> None:
    # A turn's events are those of its conversation from ``first_seq`` to
    # ``last_seq``.  ``reply_clipped``: ``reply`` holds only the first part of a
    # very long reply (the recorder's memory stays bounded); the whole of it is
    # read back from those events' text deltas.
    db.execute("ALTER TABLE turns ADD COLUMN first_seq INTEGER")
    db.execute("ALTER TABLE turns ADD COLUMN last_seq INTEGER")
    db.execute("ALTER TABLE turns ADD COLUMN reply_clipped INTEGER NOT NULL DEFAULT 0")


def _v7(db: _Tx) -> None:
    # The configured agent a thread talks to (the web UI's agent picker); NULL: the default agent.
    db.execute("ALTER TABLE threads ADD COLUMN agent TEXT")


def _v8(db: _Tx) -> None:
    # Transcripts: a conversation's events are its transcript file (under
    # ``transcripts/`` beside the database) replayed, no longer rows of
    # ``events``; ``transcript`` names the file (NULL: recorded before, its
    # events stay in ``events`` and are read from there).  A turn's records
    # end before ``tx_end`` (a replay of the turn reads no further) and its
    # start was noted at ``tx_start``; ``message`` is a failed turn's message.
    db.execute("ALTER TABLE conversations ADD COLUMN transcript TEXT")
    db.execute("ALTER TABLE turns ADD COLUMN tx_start INTEGER")
    db.execute("ALTER TABLE turns ADD COLUMN tx_end INTEGER")
    db.execute("ALTER TABLE turns ADD COLUMN message TEXT")


def _v9(db: _Tx) -> None:
    # Every open of the database looks for turns left ``running`` by a killed
    # agentrt (agentrt_sqlite._unfinished).  A partial index holds only those
    # (a turn's entry goes when it ends), so the look-up reads a near-empty
    # index instead of scanning every turn ever recorded; it covers the query.
    db.execute(
        "CREATE INDEX turns_running ON turns(outcome, conversation_id, first_seq) WHERE outcome = 'running'"
    )


#: The migrations in order: index ``i`` brings version ``i`` to ``i + 1``.
MIGRATIONS: tuple[Callable[[_Tx], None], ...] = (_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9)
#: The version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring ``db`` up to ``target``; returns the version found before."""
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise AgentrtError(
            "database_too_new",
            f"the database has schema version {found}; this agentrt knows up to {SCHEMA_VERSION}",
        )
    for version in range(found, target):
        # executescript commits any open transaction first, so BEGIN explicitly
        # and keep the bump in the same transaction as the DDL.
        db.execute("BEGIN IMMEDIATE")
        try:
            current = int(db.execute("PRAGMA user_version").fetchone()[0])
            if current == version:  # another process may have migrated meanwhile
                MIGRATIONS[version](_Tx(db))
                db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return found


def _set_wal(db: sqlite3.Connection, timeout: float = 10.0) -> None:
    # On a fresh file another connection may be migrating it still in rollback
    # mode: switching to WAL then needs a lock SQLite refuses at once, without
    # its busy handler (it would deadlock otherwise).  Retry, bounded.
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def connect(path: Path, *, target: int = SCHEMA_VERSION, foreign_keys: bool = True) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the database at ``path``.

    Blocking: call it from a worker thread.  WAL lets readers (``agentrt
    threads``, the web UI) run while a sink writes.  ``synchronous=NORMAL`` in
    WAL mode never corrupts the file: a power loss can only drop the last
    commits, and a killed process loses nothing it committed; it saves one
    fsync per commit, which is what lets a sink commit every few milliseconds.
    ``foreign_keys`` is on for the stores (deleting a thread cascades) and off
    for a sink's writer, so that removing a thread while one of its
    conversations is still being recorded cannot make the writer fail.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = not path.exists()
        db = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=10.0
        )
    except (OSError, sqlite3.Error) as exc:
        raise AgentrtError(
            "database_unavailable", f"cannot open the database {str(path)!r}: {type(exc).__name__}"
        ) from exc
    try:
        if fresh:
            # Prompts and replies can be private: the file is the user's only.
            os.chmod(path, 0o600)
        if fresh:
            # Replies carry up to a MiB of text; 16 KiB pages halve the page
            # overhead.  Only effective before the first table exists.
            db.execute("PRAGMA page_size=16384")
        _set_wal(db)
        db.execute("PRAGMA synchronous=NORMAL")
        # Checkpoint every 64 MiB of WAL rather than 4 MiB: each checkpoint
        # copies and fsyncs, and at the default a busy sink spends most of its
        # time there.  journal_size_limit keeps the reused WAL file at that size.
        db.execute("PRAGMA wal_autocheckpoint=4096")
        db.execute("PRAGMA journal_size_limit=67108864")
        db.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        migrate(db, target)
        if target == SCHEMA_VERSION:
            from ._unfinished import close_unfinished

            close_unfinished(db)  # turns a killed agentrt left running (its writer is gone)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise AgentrtError(
            "database_unavailable", f"the database {str(path)!r} is not usable: {exc}"
        ) from exc
    except BaseException:
        db.close()
        raise
    return db
