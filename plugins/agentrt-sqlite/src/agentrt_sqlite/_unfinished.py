"""Turns whose agentrt process is gone: closed as ``turn_unfinished`` when the database is next opened.

A turn's row says ``running`` from its start until its terminal event is
recorded.  An agentrt killed mid-turn (SIGKILL, a power loss) never records
one, and the row would say ``running`` forever.  :func:`close_unfinished`
(run by :func:`agentrt_sqlite._schema.connect`, so by every store, sink and
reader that opens the database) closes each such turn whose writer is gone:
outcome ``failed``, code ``turn_unfinished``, and the reply so far read from
its transcript (capped as the recorder caps it; ``reply_clipped`` when longer).

How a writer is known to be gone: while a transcript is open for writing its
writer holds a shared ``flock`` on it (:class:`~agentrt_sqlite._transcript.Transcript`);
the kernel drops the lock when the process dies, however it dies.  A turn is
closed only when an exclusive lock on its transcript can be taken, so a turn
another live process (or this one) is still recording is never touched.  A
turn recorded before transcripts (no file to lock), or whose transcript is
missing, is left as it is: nothing tells whether its writer lives.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from agentrt.events import TurnFailed

from ._logs import reply_head
from ._reading import transcript_of
from ._recorder import REPLY_LIMIT, storable

__all__ = ["close_unfinished", "writer_alive", "MESSAGE", "RUNNING_TURNS", "UNFINISHED"]

#: The message of a turn closed here.
MESSAGE = ("the recording of this turn ended before the turn did (its agentrt process was gone: killed, or "
           "the machine stopped, or recording failed); the reply is what its transcript kept")
#: The terminal event such a turn never recorded: what its row is closed with.
UNFINISHED = TurnFailed(code="turn_unfinished", message=MESSAGE)
#: The look-up every open makes: answered from the partial index ``turns_running`` (schema v9),
#: which holds the running turns only, so it costs the same however many turns were recorded.
RUNNING_TURNS = "SELECT id, conversation_id, first_seq FROM turns WHERE outcome = 'running'"


def writer_alive(path: Path) -> bool | None:
    """Whether a live process holds the transcript at ``path`` open for writing (``None``: no such file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing the descriptor drops the lock taken on it
    return False


def close_unfinished(db: sqlite3.Connection) -> int:
    """Close every ``running`` turn whose writer is gone as ``turn_unfinished``; how many were closed."""
    rows = db.execute(RUNNING_TURNS).fetchall()
    gone: list[tuple[str, int, int, int]] = []
    for row_id, conversation_id, first_seq in rows:
        path = transcript_of(db, conversation_id)
        if path is None or first_seq is None or writer_alive(path) is not False:
            continue
        try:
            size = path.stat().st_size
            reply, more = reply_head(db, conversation_id, first_seq, None, size, REPLY_LIMIT)
        except (OSError, ValueError):
            continue  # removed meanwhile, or not a transcript this agentrt reads: left as it is
        gone.append((storable(reply), int(more), size, row_id))
    if not gone:
        return 0
    closed = 0
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return 0  # a read-only file, or busy past the timeout: a later open closes them
    try:
        for text, clipped, size, row_id in gone:
            # Still running: another opener may have closed it meanwhile.
            closed += db.execute(
                "UPDATE turns SET outcome = 'failed', code = ?, message = ?, reply = ?,"
                " reply_clipped = ?, tx_end = ? WHERE id = ? AND outcome = 'running'",
                (UNFINISHED.code, UNFINISHED.message, text, clipped, size, row_id),
            ).rowcount
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return closed
