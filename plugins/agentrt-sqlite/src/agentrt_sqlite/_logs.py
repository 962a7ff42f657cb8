"""The logs: every recorded turn, newest first, with full-text search (FTS5).

Synchronous queries over one connection; :class:`~agentrt_sqlite._store.SqliteStore`
runs them in its worker thread.
"""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["LOG_FIELDS", "fts_query", "search_turns", "latest_conversation"]

#: The keys of each mapping :func:`search_turns` returns.
LOG_FIELDS = (
    "id", "conversation_id", "turn", "prompt", "reply", "outcome", "code", "started_at", "duration",
    "input_tokens", "output_tokens", "agent", "dialect", "executable", "model", "session_id", "thread",
    "continues",
)

_SELECT = (
    "SELECT u.id, u.conversation_id, u.turn, u.prompt, u.reply, u.outcome, u.code, u.started_at, u.duration,"
    " u.input_tokens, u.output_tokens, c.agent, c.dialect, c.executable, c.model, c.session_id, t.name,"
    " c.continues FROM turns u JOIN conversations c ON u.conversation_id = c.id"
    " LEFT JOIN threads t ON c.thread_id = t.id"
)


def fts_query(text: str) -> str | None:
    """``text`` as an FTS5 query matching rows that hold every word (as a prefix-free token).

    Each word is quoted, so punctuation in what the user typed (``-``, ``:``,
    ``"``, ``*``) is searched for, never parsed as FTS5 syntax.  ``None`` when
    there is no word.
    """
    words = text.split()
    if not words:
        return None
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def search_turns(
    db: sqlite3.Connection, *, limit: int | None = 10, query: str | None = None, agent: str | None = None
) -> list[dict[str, Any]]:
    """Turns newest first (at most ``limit``; ``None`` or 0: all), matching ``query`` and ``agent``."""
    where: list[str] = []
    params: list[Any] = []
    if query is not None:
        match = fts_query(query)
        if match is None:
            return []
        where.append("u.id IN (SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?)")
        params.append(match)
    if agent is not None:
        where.append("c.agent = ?")
        params.append(agent)
    sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY u.started_at DESC, u.id DESC LIMIT ?"
    params.append(limit if limit else -1)
    cur = db.execute(sql, params)
    return [dict(zip(LOG_FIELDS, row)) for row in cur.fetchall()]


def latest_conversation(db: sqlite3.Connection, *, agent: str | None = None) -> dict[str, Any] | None:
    """The most recently started conversation that has a native session id (of ``agent``, if given)."""
    sql = (
        "SELECT c.id, c.agent, c.dialect, c.executable, c.model, c.session_id, t.name FROM conversations c"
        " LEFT JOIN threads t ON c.thread_id = t.id WHERE c.session_id IS NOT NULL"
    )
    params: list[Any] = []
    if agent is not None:
        sql += " AND c.agent = ?"
        params.append(agent)
    row = db.execute(sql + " ORDER BY c.started_at DESC, c.rowid DESC LIMIT 1", params).fetchone()
    if row is None:
        return None
    keys = ("id", "agent", "dialect", "executable", "model", "session_id", "thread")
    return dict(zip(keys, row))
