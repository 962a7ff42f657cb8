"""A corrupted or foreign database file is ``database_unavailable`` (exit 2, no traceback) in every command."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentrt.testing import write_tape_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _bad_database(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.db"
    if kind == "random-bytes":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "text":
        path.write_text("not a database, just notes\n" * 200)
    else:  # a real database whose schema page was overwritten
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE t (x)")
            db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 50)
        db.close()
        with path.open("r+b") as handle:
            handle.seek(100)
            handle.write(b"\xa5" * 8000)
    return path


def _agentrt(tmp_path: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    tape = tmp_path / "tape.jsonl"
    tape.write_text('{"type":"result","subtype":"success","is_error":false,"session_id":"s-1"}\n')
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "AGENTRT_DATABASE_URL": f"sqlite://{db}",
        # A fixture agent that logs its argv when started: the check that nothing was spawned.
        "AWP_AGENT_CLI_EXECUTABLE": write_tape_agent(tmp_path, tape),
        "AWP_AGENT_CLI_ARGS_JSON": f'["--argv-log", "{tmp_path / "argv.log"}"]',
        "AGENTRT_BOTS_CONFIG": str(tmp_path / "no-bots.toml"),
    }
    return subprocess.run(
        [AGENTRT, *args], capture_output=True, text=True, env=env, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )


KINDS = ["random-bytes", "text", "corrupted-sqlite"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "command",
    [("run", "--thread", "t", "hi"), ("web", "--port", "0", "--no-bots"), ("threads", "list")],
    ids=["run-thread", "web", "threads"],
)
def test_unusable_database_is_database_unavailable_exit_2(tmp_path: Path, kind: str, command: tuple[str, ...]) -> None:
    db = _bad_database(tmp_path, kind)
    before = db.read_bytes()
    proc = _agentrt(tmp_path, db, *command)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("agentrt: error: database_unavailable: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "argv.log").exists()  # nothing was spawned
    assert db.read_bytes() == before  # and nothing was written over the user's file
