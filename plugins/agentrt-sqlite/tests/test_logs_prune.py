"""Retention: ``agentrt logs --prune`` with ``[logs] max_age_days`` / ``max_size_mb``, over a real database file.

The conversations are recorded by real ``agentrt run`` subprocesses; only
their start times are moved into the past (what a month of use would leave).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from agentrt.testing import write_fixture_agent, write_tape_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
DAY = 86400.0


def cli(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/logs.db",
    }
    env.update(extra)
    return subprocess.run([AGENTRT, *args], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)


def _age(tmp: Path, prompt: str, days: float) -> None:
    with sqlite3.connect(tmp / "logs.db") as db:
        cid = db.execute("SELECT conversation_id FROM turns WHERE prompt = ?", (prompt,)).fetchone()[0]
        db.execute("UPDATE conversations SET started_at = started_at - ? WHERE id = ?", (days * DAY, cid))
        db.execute("UPDATE turns SET started_at = started_at - ? WHERE conversation_id = ?", (days * DAY, cid))
    db.close()


def _transcripts(tmp: Path) -> set[str]:
    return {p.name for p in (tmp / "transcripts").glob("*.atr")}


def _disk(tmp: Path) -> int:
    """The database and its transcripts, in bytes (what the size limit counts)."""
    return _count(tmp, "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size") + sum(
        p.stat().st_size for p in (tmp / "transcripts").glob("*.atr"))


def _count(tmp: Path, sql: str) -> int:
    with sqlite3.connect(tmp / "logs.db") as db:
        n = int(db.execute(sql).fetchone()[0])
    db.close()
    return n


def test_prune_by_age_removes_whole_old_conversations_and_says_what(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    (tmp_path / "config.toml").write_text(f'[agents.fx]\nexecutable = "{exe}"\n[logs]\nmax_age_days = 30\n')
    for prompt in ("ancient aardvark", "older okapi", "fresh ferret"):
        assert cli(tmp_path, "run", "-a", "fx", prompt).returncode == 0
    _age(tmp_path, "ancient aardvark", 45)
    _age(tmp_path, "older okapi", 10)
    files_before = _transcripts(tmp_path)

    done = cli(tmp_path, "logs", "--prune")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("removed 1 conversations (1 turns, "), done.stdout
    left = [json.loads(x)["prompt"] for x in cli(tmp_path, "logs", "--json").stdout.splitlines()]
    assert left == ["fresh ferret", "older okapi"]
    # Whole: its transcript went with it, and search no longer finds it.
    left_files = _transcripts(tmp_path)
    assert len(files_before) == 3 and left_files < files_before and len(left_files) == 2
    with sqlite3.connect(tmp_path / "logs.db") as db:
        named = {r[0] for r in db.execute("SELECT transcript FROM conversations")}
    db.close()
    assert named == left_files  # every file left is a conversation's, and every conversation has its file
    assert cli(tmp_path, "logs", "-q", "aardvark").stdout.strip() == "no matching turns"
    # Nothing else is past the limit; the command line wins over the config.
    assert cli(tmp_path, "logs", "--prune").stdout.startswith("nothing to remove")
    report = json.loads(cli(tmp_path, "logs", "--prune", "--max-age-days", "5", "--json").stdout)
    assert report["conversations"] == 1 and report["turns"] == 1 and report["max_age_days"] == 5
    assert [json.loads(x)["prompt"] for x in cli(tmp_path, "logs", "--json").stdout.splitlines()] == [
        "fresh ferret"]


def _big_tape(tmp_path: Path, name: str, size: int) -> str:
    session = str(uuid.uuid4())
    lines = [{"type": "stream_event", "session_id": session, "uuid": str(uuid.uuid4()),
              "event": {"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": f"{name}-{i:05d} " + "y" * 990}}}
             for i in range(size // 1000)]
    lines.append({"type": "result", "subtype": "success", "is_error": False, "result": "done",
                  "session_id": session})
    tape = tmp_path / f"{name}.jsonl"
    tape.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return write_tape_agent(tmp_path, tape, name=f"agent-{name}")


def test_prune_to_a_size_removes_the_oldest_until_the_file_fits(tmp_path: Path) -> None:
    names = ("first", "second", "third")
    for days, name in zip((3, 2, 1), names):
        agent = _big_tape(tmp_path, name, 1_000_000)
        done = cli(tmp_path, "run", "--protocol", "stream-json", name, AWP_AGENT_CLI_EXECUTABLE=agent)
        assert done.returncode == 0, done.stderr
        _age(tmp_path, name, days)
    size_before = _disk(tmp_path)
    limit = size_before * 0.6  # room for the newest conversation, not for all three
    (tmp_path / "config.toml").write_text(f"[logs]\nmax_size_mb = {limit / 1e6}\n")

    done = cli(tmp_path, "logs", "--prune", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["conversations"] >= 1 and report["compacted"] is True
    assert report["size_before"] == size_before and report["size_after"] <= limit
    assert _disk(tmp_path) == report["size_after"] and (tmp_path / "logs.db").stat().st_size <= limit
    left = [json.loads(x)["prompt"] for x in cli(tmp_path, "logs", "--json").stdout.splitlines()]
    assert left == list(reversed(names))[: 3 - report["conversations"]]  # the oldest went first
    assert left[0] == "third"  # the newest stays


def test_prune_needs_a_limit_and_spares_a_conversation_that_may_still_be_recording(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    (tmp_path / "config.toml").write_text(f'[agents.fx]\nexecutable = "{exe}"\n')
    assert cli(tmp_path, "run", "-a", "fx", "still going").returncode == 0
    none = cli(tmp_path, "logs", "--prune")
    assert none.returncode == 2 and none.stderr.startswith("agentrt: error: no_retention_limit: ")
    bare = cli(tmp_path, "logs", "--max-age-days", "1")
    assert bare.returncode == 2 and "go with --prune" in bare.stderr
    # A conversation without an end that started an hour ago may still be writing: never removed.
    with sqlite3.connect(tmp_path / "logs.db") as db:
        db.execute("UPDATE conversations SET ended_at = NULL, started_at = ?", (time.time() - 3600,))
    db.close()
    kept = cli(tmp_path, "logs", "--prune", "--max-age-days", "0.01")
    assert kept.returncode == 0 and kept.stdout.startswith("nothing to remove"), kept.stdout
    assert _count(tmp_path, "SELECT count(*) FROM conversations") == 1
