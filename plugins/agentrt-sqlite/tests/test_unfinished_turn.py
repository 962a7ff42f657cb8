"""A turn cut short by SIGKILL of ``agentrt run`` is closed as ``turn_unfinished`` when the database is next opened.

A real ``agentrt run --thread`` (recording by default) streams the first
words of a reply from a stream-json agent that then waits; once those words
are on its stdout and the turn's row is committed, agentrt is killed with
SIGKILL.  The row still says ``running`` (nothing could write it); the next
open of the database closes it with its reply so far from the transcript, and
``agentrt logs`` and ``agentrt threads show`` say so.  A turn whose agentrt is
alive is never touched by another process's open.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from agentrt_sqlite._schema import connect
from agentrt_sqlite.api import SqliteStore

AGENTRT = str(Path(sys.executable).with_name("agentrt"))

# Writes its first words, then waits until its stdin closes (agentrt gone), and exits.
_AGENT = r"""
import json, sys
def emit(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
emit({"type": "system", "subtype": "init", "session_id": "sess-1", "model": "m"})
for text in ("The first ", "words so far."):
    emit({"type": "stream_event", "session_id": "sess-1", "uuid": text,
          "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}})
for _ in sys.stdin:
    pass
"""


def _env(tmp_path: Path) -> dict[str, str]:
    agent = tmp_path / "waiting-agent"
    agent.write_text(f"#!{sys.executable} -S\n{_AGENT}")
    agent.chmod(0o700)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
            "AGENTRT_CONFIG": str(tmp_path / "none.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/u.db",
            "AWP_AGENT_CLI_EXECUTABLE": str(agent), "AWP_AGENT_CLI_PROTOCOL": "stream-json"}


def _rows(db_path: Path) -> list[tuple[Any, ...]]:
    """The turn rows, read as they are (read-only: no open that would close anything)."""
    if not db_path.exists():
        return []
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT outcome, code, reply, message FROM turns").fetchall()
    except sqlite3.OperationalError:  # the tables are not there yet
        return []
    finally:
        db.close()


async def _until_running(db_path: Path, proc: Any) -> None:
    """Wait (bounded) until the turn's row is committed as ``running`` while the process lives."""
    with trio.fail_after(60):
        while [r[0] for r in await trio.to_thread.run_sync(_rows, db_path)] != ["running"]:
            assert proc.returncode is None, "agentrt ended before its turn was recorded"
            await trio.sleep(0.02)


async def _cli(env: dict[str, str], *args: str) -> str:
    done = await trio.run_process([AGENTRT, *args], env=env, capture_stdout=True, capture_stderr=True,
                                  stdin=subprocess.DEVNULL)
    return str(done.stdout.decode())


async def test_sigkill_mid_turn_is_closed_as_unfinished_on_next_open(tmp_path: Path) -> None:
    env = _env(tmp_path)
    db_path = tmp_path / "u.db"
    proc = await trio.lowlevel.open_process([AGENTRT, "run", "--thread", "t1", "go on"], env=env,
                                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    try:
        seen = b""
        with trio.fail_after(60):
            while b"words so far." not in seen:
                chunk = await proc.stdout.receive_some()
                assert chunk, seen
                seen += chunk
        await _until_running(db_path, proc)
        # Another process opening the database while agentrt lives leaves its turn alone.
        await trio.to_thread.run_sync(lambda: connect(db_path).close())
        assert [r[0] for r in _rows(db_path)] == ["running"]
        proc.send_signal(signal.SIGKILL)
        with trio.fail_after(60):
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
        await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL
    assert [r[0] for r in _rows(db_path)] == ["running"]  # nothing closed it: agentrt was killed

    # The next open (here: agentrt logs) closes it, with the reply its transcript kept.
    logs = await _cli(env, "logs")
    assert "failed (turn_unfinished)" in logs, logs
    [(outcome, code, reply, message)] = _rows(db_path)
    assert (outcome, code, reply) == ("failed", "turn_unfinished", "The first words so far.")
    assert "ended before the turn did" in message
    shown = json.loads(await _cli(env, "threads", "show", "--json", "t1"))
    [turn] = shown["turns"]
    assert (turn["outcome"], turn["code"], turn["reply"]) == ("failed", "turn_unfinished", "The first words so far.")
    assert "turn_unfinished" in await _cli(env, "threads", "show", "t1")
    # What the web thread page reads: the same row, its message with it.
    store = SqliteStore(db_path)
    try:
        [row] = await store.thread_turns("t1", reply_chars=100_000)
    finally:
        await store.aclose()
    assert (row["code"], row["reply"], row["reply_more"]) == ("turn_unfinished", "The first words so far.", False)
    assert row["message"] == message
