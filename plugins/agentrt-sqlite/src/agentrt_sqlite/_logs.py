"""The logs: every recorded turn, newest first, with full-text search (FTS5).

Synchronous queries over one connection; :class:`~agentrt_sqlite._store.SqliteStore`
runs them in its worker thread.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ._reading import turn_texts

__all__ = ["APPROVAL_FIELDS", "LOG_FIELDS", "fts_query", "full_reply", "reply_head", "reply_slice", "list_approvals",
           "record_approval", "search_turns", "latest_conversation"]

#: The keys of each mapping :func:`search_turns` returns.
LOG_FIELDS = (
    "id", "conversation_id", "turn", "prompt", "reply", "outcome", "code", "started_at", "duration",
    "input_tokens", "output_tokens", "agent", "dialect", "executable", "model", "session_id", "thread",
    "continues",
)

_SELECT = (
    "SELECT u.id, u.conversation_id, u.turn, u.prompt, u.reply, u.outcome, u.code, u.started_at, u.duration,"
    " u.input_tokens, u.output_tokens, c.agent, c.dialect, c.executable, c.model, c.session_id, t.name,"
    " c.continues, u.reply_clipped, u.first_seq, u.last_seq, u.tx_end FROM turns u JOIN conversations c"
    " ON u.conversation_id = c.id LEFT JOIN threads t ON c.thread_id = t.id"
)


def full_reply(
    db: sqlite3.Connection, conversation_id: str, first_seq: int, last_seq: int | None, tx_end: int | None = None
) -> str:
    """A turn's whole reply, read back from its text deltas: its transcript replayed (or its ``events`` rows).

    For a turn whose ``reply`` column holds only the first part
    (``reply_clipped``): the recorder keeps a bounded prefix, the transcript
    keeps every byte.
    """
    return "".join(turn_texts(db, conversation_id, first_seq, last_seq, tx_end))


def reply_head(
    db: sqlite3.Connection, conversation_id: str, first_seq: int, last_seq: int | None, tx_end: int | None,
    chars: int,
) -> tuple[str, bool]:
    """The first ``chars`` characters of a turn's reply from its transcript, and whether more follow.

    The replay stops as soon as it has them (and one more character, to know).
    """
    pieces: list[str] = []
    size = 0
    for text in turn_texts(db, conversation_id, first_seq, last_seq, tx_end):
        if size + len(text) > chars:
            pieces.append(text[: chars - size])
            return "".join(pieces), True
        pieces.append(text)
        size += len(text)
    return "".join(pieces), False


def reply_slice(
    db: sqlite3.Connection, thread: str, conversation_id: str, turn: int, offset: int, size: int
) -> tuple[str, bool] | None:
    """Characters ``[offset, offset + size)`` of a thread's turn's reply, and whether more follow.

    ``None``: the thread has no such turn.  A reply whole in its row is cut there; a clipped one (``reply_clipped``) is
    read delta by delta from its transcript's replay, keeping only the part asked for.
    """
    offset, size = max(0, offset), max(1, size)
    row = db.execute(
        "SELECT substr(u.reply, ?, ?), length(u.reply), u.reply_clipped, u.first_seq, u.last_seq, u.tx_end"
        " FROM turns u JOIN conversations c ON u.conversation_id = c.id JOIN threads t ON c.thread_id = t.id"
        " WHERE t.name = ? AND u.conversation_id = ? AND u.turn = ?",
        (offset + 1, size, thread, conversation_id, turn),
    ).fetchone()
    if row is None:
        return None
    part, length, clipped, first_seq, last_seq, tx_end = row
    if not clipped:
        return part or "", (length or 0) > offset + size
    pieces: list[str] = []
    at = 0  # characters of the reply before the current delta
    end = offset + size
    for text in turn_texts(db, conversation_id, first_seq, last_seq, tx_end):
        if at + len(text) > offset and at < end:
            pieces.append(text[max(0, offset - at) : end - at])
        at += len(text)
        if at > end:
            return "".join(pieces), True
    return "".join(pieces), False


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
    out = []
    for row in cur.fetchall():
        turn = dict(zip(LOG_FIELDS, row))
        clipped, first_seq, last_seq, tx_end = row[len(LOG_FIELDS):]
        if clipped:
            turn["reply"] = full_reply(db, turn["conversation_id"], first_seq, last_seq, tx_end)
        out.append(turn)
    return out


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


#: The keys of each mapping :func:`list_approvals` returns.
APPROVAL_FIELDS = ("id", "conversation_id", "thread", "tool", "summary", "decision", "by", "at", "agent")


def record_approval(db: sqlite3.Connection, decision: Any) -> None:
    """Store one :class:`agentrt.approval.ApprovalDecision`."""
    db.execute(
        "INSERT INTO approvals (conversation_id, thread, tool, summary, decision, by, at) VALUES (?,?,?,?,?,?,?)",
        (decision.conversation_id, decision.thread, decision.tool, decision.summary, decision.decision,
         decision.by, decision.at),
    )


def list_approvals(
    db: sqlite3.Connection, *, limit: int | None = 10, agent: str | None = None, conversation: str | None = None
) -> list[dict[str, Any]]:
    """Tool-approval decisions newest first (at most ``limit``; ``None`` or 0: all).

    ``thread`` is the thread's current name (it may have been renamed since), else the name it had.
    """
    sql = (
        "SELECT a.id, a.conversation_id, COALESCE(t.name, a.thread), a.tool, a.summary, a.decision, a.by, a.at,"
        " c.agent FROM approvals a LEFT JOIN conversations c ON a.conversation_id = c.id"
        " LEFT JOIN threads t ON c.thread_id = t.id"
    )
    where: list[str] = []
    params: list[Any] = []
    if agent is not None:
        where.append("c.agent = ?")
        params.append(agent)
    if conversation is not None:
        where.append("a.conversation_id = ?")
        params.append(conversation)
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY a.at DESC, a.id DESC LIMIT ?"
    params.append(limit if limit else -1)
    return [dict(zip(APPROVAL_FIELDS, row)) for row in db.execute(sql, params).fetchall()]
