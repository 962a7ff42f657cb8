"""A turn cut short by SIGKILL of ``agentrt run`` shows on the web thread page as unfinished, with its words so far."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import agent_pids, alive, base_env

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _outcomes(db_path: Path) -> list[str]:
    """The turn rows' outcomes as they are (read-only: an open that closes nothing)."""
    if not db_path.exists():
        return []
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT outcome FROM turns")]
    except sqlite3.OperationalError:  # no tables yet
        return []
    finally:
        db.close()


def test_killed_turn_shows_as_unfinished(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    env = base_env(tmp_path, agent)
    db_path = tmp_path / "agentrt.db"
    proc = subprocess.Popen([AGENTRT, "run", "--thread", "cut", "hang"], env=env, stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    try:
        seen = b""
        while b"tick2" not in seen:
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, seen
            seen += chunk
        guard = time.monotonic() + 60  # a hang guard only: the row is committed within ms
        while _outcomes(db_path) != ["running"]:
            assert time.monotonic() < guard and proc.poll() is None, _outcomes(db_path)
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)
        proc.stdout.close()
        for pid in agent_pids(tmp_path):  # the fixture agent of the killed run (it ends on its broken pipe)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert _outcomes(db_path) == ["running"]

    srv = server_factory(env)
    page = browser.new_page()
    page.goto(f"{srv.url}/threads/cut")
    bubble = page.locator(".error-bubble")
    bubble.wait_for()
    assert bubble.locator("code").inner_text() == "turn_unfinished"
    assert "ended before the turn did" in bubble.inner_text()
    assert "tick0 tick1 tick2" in bubble.inner_text()  # its words so far, from the transcript
    assert page.locator("text=No result was recorded for this turn").count() == 0
    assert _outcomes(db_path) == ["failed"]
