"""`agentrt run` over odd-but-valid agent output: a lone surrogate mid-turn, a sink that fails."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from agentrt.testing._tape_agent import write_tape_agent
from agentrt_sqlite.api import read_events

AGENTRT = str(Path(sys.executable).with_name("agentrt"))

# What an agent in JavaScript writes when slice() cut an emoji in half: JSON.stringify
# escapes the lone half, JSON.parse accepts it back, but no UTF-8 encoder takes it.
CUT = "cut \\ud83d"
TAPE = [
    {"type": "system", "subtype": "init", "session_id": "tape-1", "model": "m", "tools": []},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "before "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "cut \ud83d"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " after"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "result", "subtype": "success", "is_error": False, "session_id": "tape-1",
     "result": "before cut \ud83d after", "usage": {"input_tokens": 3, "output_tokens": 4}},
]
REPLY = "before cut \ufffd after"


def surrogate_agent(tmp_path: Path) -> str:
    """A fixture agent (tape replay) whose reply holds an escaped lone surrogate."""
    tape = tmp_path / "surrogate.jsonl"
    text = "".join(json.dumps(obj) + "\n" for obj in TAPE)  # ensure_ascii: the half stays an escape
    assert "\\ud83d" in text
    tape.write_text(text, encoding="ascii")
    return write_tape_agent(tmp_path, tape)


def run_cli(
    *args: str, env: dict[str, str], stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[bytes]:
    # The run records itself by default: into a scratch directory, never a shared home.
    scratch = tempfile.mkdtemp(prefix="agentrt-odd-")
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch, "LANG": "C.UTF-8",
        "XDG_DATA_HOME": os.path.join(scratch, "data"), "XDG_CONFIG_HOME": os.path.join(scratch, "config"), **env,
    }
    return subprocess.run(
        [AGENTRT, *args], env=base, stdout=stdout, stderr=subprocess.PIPE, timeout=60, stdin=subprocess.DEVNULL,
        check=False,
    )


def test_lone_surrogate_mid_turn_prints_the_whole_reply(tmp_path: Path) -> None:
    proc = run_cli("run", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": surrogate_agent(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode("utf-8") == REPLY + "\n"
    assert b"sink_" not in proc.stderr


def test_lone_surrogate_mid_turn_in_json_output(tmp_path: Path) -> None:
    proc = run_cli("run", "--json", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": surrogate_agent(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == REPLY
    done = [e for e in events if e["type"] == "turn_completed"]
    assert len(done) == 1 and done[0]["result"] == REPLY
    assert events[-1]["type"] == "process_exited"
    assert not [e for e in events if e["type"] == "diagnostic"]


def test_lone_surrogate_mid_turn_is_stored_by_the_database_sink(tmp_path: Path) -> None:
    db = tmp_path / "agentrt.db"
    env = {"AWP_AGENT_CLI_EXECUTABLE": surrogate_agent(tmp_path), "AGENTRT_DATABASE_URL": f"sqlite://{db}"}
    proc = run_cli("run", "--thread", "odd", "hi", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode("utf-8") == REPLY + "\n"
    with sqlite3.connect(db) as conn:
        turns = conn.execute("SELECT outcome, reply FROM turns").fetchall()
        types = [env["event"]["type"] for env in read_events(db)]
    assert turns == [("completed", REPLY)]
    assert types.count("text_delta") == 3 and "turn_completed" in types and types[-1] == "process_exited"
    # A second run resumes the stored session: the thread kept working too.
    again = run_cli("run", "--thread", "odd", "again", env=env)
    assert again.returncode == 0, again.stderr


def test_run_exits_non_zero_when_its_output_cannot_be_written(tmp_path: Path) -> None:
    # stdout is a pipe nobody reads any more (`agentrt run ... | head -c0`): every
    # write fails: the agent is stopped, and the exit status and stderr say so.
    read, write = os.pipe()
    os.close(read)
    try:
        proc = run_cli("run", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": surrogate_agent(tmp_path)}, stdout=write)
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "agentrt: error: output_closed:" in err
