"""Logs: every run recorded by default, ``agentrt logs`` with FTS5 search, ``run -c``, thread rename.

Real CLI subprocesses with the fixture agent CLI, over a real database file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import trio

from agentrt.events import EventBatch, SessionStarted, TextDelta, TurnCompleted, TurnStarted
from agentrt.testing import write_fixture_agent
from agentrt_sqlite._recorder import ConversationInfo
from agentrt_sqlite._schema import SCHEMA_VERSION, connect
from agentrt_sqlite._sink import SqliteSink

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def cli(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/logs.db",
    }
    env.update(extra)
    return subprocess.run([AGENTRT, *args], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def lines(proc: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in proc.stdout.splitlines()]


def _setup(tmp: Path) -> str:
    exe = write_fixture_agent(tmp)
    (tmp / "config.toml").write_text(f'[agents.fx]\nexecutable = "{exe}"\n[agents.fy]\nexecutable = "{exe}"\n')
    return exe


def test_every_run_is_recorded_and_logs_lists_and_searches_them(tmp_path: Path) -> None:
    _setup(tmp_path)
    for agent, prompt in (("fx", "tell me about zebras"), ("fy", "what about giraffes"),
                          ("fx", "zebra-stripes: why?")):
        done = cli(tmp_path, "run", "-a", agent, prompt)
        assert done.returncode == 0, done.stderr
    every = lines(cli(tmp_path, "logs", "--json"))
    assert [r["prompt"] for r in every] == ["zebra-stripes: why?", "what about giraffes", "tell me about zebras"]
    assert every[0]["reply"] == "echo: zebra-stripes: why?" and every[0]["agent"] == "fx"
    assert every[0]["thread"] is None and every[0]["outcome"] == "completed"
    # Full-text search over prompts and replies; punctuation is searched, never parsed.
    assert [r["prompt"] for r in lines(cli(tmp_path, "logs", "-q", "giraffes", "--json"))] == ["what about giraffes"]
    assert [r["prompt"] for r in lines(cli(tmp_path, "logs", "-q", "zebra-stripes:", "--json"))] == [
        "zebra-stripes: why?"]
    assert [r["prompt"] for r in lines(cli(tmp_path, "logs", "-q", 'echo "tell', "--json"))] == [
        "tell me about zebras"]
    assert lines(cli(tmp_path, "logs", "-q", "okapi", "--json")) == []
    # --search is the same search, by its longer name.
    assert [r["prompt"] for r in lines(cli(tmp_path, "logs", "--search", "giraffes", "--json"))] == [
        "what about giraffes"]
    assert [r["agent"] for r in lines(cli(tmp_path, "logs", "-a", "fy", "--json"))] == ["fy"]
    assert len(lines(cli(tmp_path, "logs", "-n", "2", "--json"))) == 2
    text = cli(tmp_path, "logs", "-n", "1")
    assert text.returncode == 0 and "zebra-stripes: why?" in text.stdout
    assert f"  fx ({every[0]['dialect']}) " in text.stdout  # the agent's name, its dialect beside it
    assert cli(tmp_path, "logs", "-q", "okapi").stdout.strip() == "no matching turns"


def test_no_log_and_the_config_opt_out_record_nothing(tmp_path: Path) -> None:
    _setup(tmp_path)
    assert cli(tmp_path, "run", "-a", "fx", "--no-log", "private").returncode == 0
    assert not (tmp_path / "logs.db").exists()
    with (tmp_path / "config.toml").open("a") as handle:
        handle.write("[logs]\nenabled = false\n")
    assert cli(tmp_path, "run", "-a", "fx", "also private").returncode == 0
    assert not (tmp_path / "logs.db").exists()
    assert cli(tmp_path, "logs").stdout.strip() == "nothing recorded yet"


def test_run_c_continues_the_latest_conversation_and_its_session(tmp_path: Path) -> None:
    _setup(tmp_path)
    nothing = cli(tmp_path, "run", "-c", "hello")
    assert nothing.returncode == 2 and "no_conversation" in nothing.stderr
    first = cli(tmp_path, "run", "-a", "fy", "--json", "first")
    session = next(e["session_id"] for e in lines(first) if e["type"] == "session_started")
    # No -a: the agent of the latest conversation is used again, and its session resumed
    # (the fixture agent reports the session it was asked to resume).
    again = lines(cli(tmp_path, "run", "-c", "--json", "second"))
    assert next(e["session_id"] for e in again if e["type"] == "session_started") == session
    rows = lines(cli(tmp_path, "logs", "--json"))
    assert [(r["prompt"], r["agent"], r["session_id"]) for r in rows] == [
        ("second", "fy", session), ("first", "fy", session)]
    assert rows[0]["continues"] == rows[1]["conversation_id"]
    # A thread's conversation continues as that thread.
    assert cli(tmp_path, "run", "-a", "fx", "--thread", "proj", "third").returncode == 0
    assert cli(tmp_path, "run", "-c", "fourth").returncode == 0
    turns = json.loads(cli(tmp_path, "threads", "show", "proj", "--json").stdout)["turns"]
    assert [t["prompt"] for t in turns] == ["third", "fourth"]


def test_threads_show_json_and_rename(tmp_path: Path) -> None:
    _setup(tmp_path)
    assert cli(tmp_path, "run", "-a", "fx", "--thread", "old", "hi").returncode == 0
    assert cli(tmp_path, "run", "-a", "fx", "--thread", "other", "hi").returncode == 0
    shown = json.loads(cli(tmp_path, "threads", "show", "old", "--json").stdout)
    assert shown["name"] == "old" and shown["session_id"].startswith("fixture-")
    assert [(t["prompt"], t["reply"]) for t in shown["turns"]] == [("hi", "echo: hi")]
    taken = cli(tmp_path, "threads", "rename", "old", "other")
    assert taken.returncode == 2 and "thread_exists" in taken.stderr
    assert cli(tmp_path, "threads", "rename", "old", "new").returncode == 0
    renamed = json.loads(cli(tmp_path, "threads", "show", "new", "--json").stdout)
    assert renamed["session_id"] == shown["session_id"] and len(renamed["turns"]) == 1
    assert cli(tmp_path, "threads", "show", "old").returncode == 1
    assert cli(tmp_path, "threads", "rename", "nope", "x").returncode == 1
    # The renamed thread resumes its session.
    assert cli(tmp_path, "run", "-a", "fx", "--thread", "new", "again").returncode == 0
    assert len(json.loads(cli(tmp_path, "threads", "show", "new", "--json").stdout)["turns"]) == 2


async def test_upgrade_from_version_3_makes_old_turns_searchable(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    old = connect(path, target=3)
    old.execute("INSERT INTO conversations (id, dialect, started_at) VALUES ('c0', 'awp-jsonl', 1)")
    old.execute("INSERT INTO turns (conversation_id, turn, prompt, reply, outcome, started_at)"
                " VALUES ('c0', 1, 'an old question about lemurs', 'old answer', 'completed', 1)")
    old.close()
    db = connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 4
        assert db.execute("SELECT id, agent, continues FROM conversations").fetchall() == [("c0", None, None)]
    finally:
        db.close()
    # New turns recorded by the sink are indexed as they are written, replies included.
    sink = SqliteSink(path, info=ConversationInfo(dialect="awp-jsonl", agent="fx"))
    batch = (SessionStarted(session_id="s-1"), TurnStarted(turn=1, prompt="new question"),
             TextDelta(text="about lemurs too"), TurnCompleted())
    for i, ev in enumerate(batch):
        await sink.handle(EventBatch(source="c1", first_seq=i, mono=float(i), wall=2e9 + i, events=(ev,)))
    await sink.aclose()

    def query() -> list[tuple[str, str | None]]:
        env = f"sqlite://{path}"
        got = cli(tmp_path, "logs", "-q", "lemurs", "--json", AGENTRT_DATABASE_URL=env)
        return [(r["prompt"], r["agent"]) for r in lines(got)]  # type: ignore[misc]

    assert await trio.to_thread.run_sync(query) == [("new question", "fx"), ("an old question about lemurs", None)]
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM turns WHERE conversation_id = 'c0'")
    conn.commit()
    conn.close()
    assert await trio.to_thread.run_sync(query) == [("new question", "fx")]


def test_a_bad_database_url_stops_run_with_its_code_and_no_log_runs_anyway(tmp_path: Path) -> None:
    _setup(tmp_path)
    bad = cli(tmp_path, "run", "-a", "fx", "hi", AGENTRT_DATABASE_URL="postgresql://u:secret@h/db")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("agentrt: error: unsupported_database_url: ") and "secret" not in bad.stderr
    ok = cli(tmp_path, "run", "-a", "fx", "--no-log", "hi", AGENTRT_DATABASE_URL="postgresql://u:secret@h/db")
    assert ok.returncode == 0 and ok.stdout.strip() == "echo: hi", ok.stderr
