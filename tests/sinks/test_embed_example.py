"""The documented embedding example runs as written (docs/examples/embed_with_sinks.py)."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import trio

from agentrt_sqlite.api import read_events

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "embed_with_sinks.py"


async def test_embed_with_sinks_example(tmp_path: Path) -> None:
    db = tmp_path / "example.db"
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    done = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, str(EXAMPLE), str(db)], capture_output=True, text=True, env=env, timeout=60,
        check=False))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out  # stdout is a pipe: the terminal UI degrades to plain text
    assert "You said: hello from an embedding program" in out  # drawn by the tui sink
    assert "stored: 'hello from an embedding program' -> 'You said: hello from an embedding program" in out
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (session,) = conn.execute("SELECT session_id FROM threads WHERE name = 'demo'").fetchone()
        assert session and f"session {session}]" in out
        types = [env["event"]["type"] for env in read_events(db)]
        assert types[0] == "turn_started" and "turn_completed" in types and types[-1] == "process_exited"
    finally:
        conn.close()
