"""Disk faults: a recording that cannot be written is one ``recorder_failed``; the run goes on, exit as the turn's.

Real ``agentrt run`` subprocesses with a tape agent (stream-json), over a
database whose directory cannot exist (its parent is a regular file: as root,
chmod alone would not stop the write) and over a real full disk (a 192 KiB
tmpfs mounted for the test; skipped, saying why, where mounting is refused).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrt.testing import write_tape_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
SECRET = "sk-test-7f3a9c"


def _tape(tmp_path: Path, chunks: int, size: int) -> str:
    session = "5b0f6c1e-8a3b-4a8e-9a53-2f1d3c0b7e11"
    lines = []
    for i in range(chunks):
        delta = {"type": "text_delta", "text": f"{i:06d}" + "x" * (size - 6)}
        event = {"type": "content_block_delta", "index": 0, "delta": delta}
        lines.append({"type": "stream_event", "event": event, "session_id": session, "uuid": str(uuid.uuid4())})
    lines.append({"type": "result", "subtype": "success", "is_error": False, "result": "done",
                  "session_id": session, "usage": {"input_tokens": 1, "output_tokens": 1}})
    tape = tmp_path / "tape.jsonl"
    tape.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return write_tape_agent(tmp_path, tape)


def _run(tmp_path: Path, db: Path, agent: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp_path / "none.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{db}",
        "AWP_AGENT_CLI_EXECUTABLE": agent, "AWP_AGENT_CLI_PROTOCOL": "stream-json",
        # A secret in the agent's environment must not reach the diagnostic.
        "AWP_AGENT_CLI_ENV_JSON": json.dumps({"ANTHROPIC_API_KEY": SECRET}),
    }
    return subprocess.run([AGENTRT, "run", *args, "hello"], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, check=False)


def _names_the_file(text: str, db: Path) -> bool:
    """``text`` names the database or a transcript beside it (whichever was written when the fault came)."""
    return repr(str(db)) in text or repr(str(db.parent / "transcripts"))[:-1] + "/" in text


def _check_one_recorder_failed(proc: subprocess.CompletedProcess[str], db: Path, *reasons: str) -> None:
    assert proc.returncode == 0, proc.stderr  # the turn completed: the exit status is the turn's
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("agentrt:")]
    assert len(warnings) == 1, proc.stderr  # said once
    assert warnings[0].startswith("agentrt: warning: recorder_failed: cannot record to "), warnings
    assert _names_the_file(warnings[0], db) and "unrecorded" in warnings[0]
    assert any(reason in warnings[0] for reason in reasons), warnings[0]
    assert SECRET not in proc.stderr and SECRET not in proc.stdout
    assert "sink_failed" not in proc.stderr and "Traceback" not in proc.stderr


def test_unwritable_directory_is_one_recorder_failed_and_the_run_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    db = blocker / "sub" / "agentrt.db"
    agent = _tape(tmp_path, chunks=3, size=20)
    plain = _run(tmp_path, db, agent)
    _check_one_recorder_failed(plain, db, "Not a directory")
    assert plain.stdout == "".join(f"{i:06d}" + "x" * 14 for i in range(3)) + "\n"

    as_json = _run(tmp_path, db, agent, "--json")
    _check_one_recorder_failed(as_json, db, "Not a directory")
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    diagnostics = [e for e in events if e["type"] == "diagnostic"]
    assert [d["code"] for d in diagnostics] == ["recorder_failed"]
    assert _names_the_file(diagnostics[0]["detail"], db)
    assert [e["type"] for e in events].count("turn_completed") == 1
    assert blocker.read_text() == "not a directory\n"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192k,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs was refused here: {done.stderr.strip()[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_mid_run_is_one_recorder_failed_and_the_reply_is_whole(tmp_path: Path, tiny_disk: Path) -> None:
    db = tiny_disk / "agentrt.db"
    # ~2 MB of reply in 1,000 deltas: the first writes fit, the disk fills mid-turn.
    agent = _tape(tmp_path, chunks=1000, size=2000)
    proc = _run(tmp_path, db, agent)
    _check_one_recorder_failed(proc, db, "full", "No space left on device")
    assert proc.stdout.count("x" * 1994) == 1000 and proc.stdout.startswith("000000")
    assert db.exists()  # it was being written when the disk filled
