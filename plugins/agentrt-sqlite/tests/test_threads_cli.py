"""``agentrt threads`` run as a real command over a real database file."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import trio

from agentrt.events import EventBatch, SessionStarted, TextDelta, TurnCompleted, TurnStarted, Usage
from agentrt_sqlite._recorder import ConversationInfo
from agentrt_sqlite._sink import SqliteSink

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _agentrt(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env["AGENTRT_DATABASE_URL"] = f"sqlite://{db}"
    return subprocess.run([AGENTRT, *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


async def _populate(db: Path) -> None:
    sink = SqliteSink(db, info=ConversationInfo(thread="proj", dialect="awp-jsonl", executable="/bin/a"))
    events = [SessionStarted(session_id="native-1", model="m"), TurnStarted(turn=1, prompt="What is 2+2?"),
              TextDelta(text="**4**"), TurnCompleted(usage=Usage(input_tokens=3, output_tokens=1))]
    for i, ev in enumerate(events):
        await sink.handle(EventBatch(source="c1", first_seq=i, mono=float(i), wall=1e9 + i, events=(ev,)))
    await sink.aclose()
    other = SqliteSink(db)  # an unnamed conversation: not a thread
    await other.handle(EventBatch(source="c2", first_seq=0, mono=0, wall=1e9, events=(TextDelta(text="x"),)))
    await other.aclose()



async def test_list_show_export_rm(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    await _populate(db)

    def cli_part() -> None:
        listed = _agentrt(db, "threads", "list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("proj\t1 turns\tawp-jsonl")
        as_json = [orjson.loads(x) for x in _agentrt(db, "threads", "list", "--json").stdout.splitlines()]
        assert [(t["name"], t["session_id"], t["turns"]) for t in as_json] == [("proj", "native-1", 1)]

        shown = _agentrt(db, "threads", "show", "proj")
        assert shown.returncode == 0
        assert "session:    native-1" in shown.stdout and "What is 2+2?" in shown.stdout

        md = _agentrt(db, "threads", "export", "proj").stdout
        assert md == "# proj\n\n## User\n\nWhat is 2+2?\n\n## Assistant\n\n**4**\n"
        lines = _agentrt(db, "threads", "export", "proj", "--format", "jsonl").stdout.splitlines()
        envs = [orjson.loads(x) for x in lines]
        assert [(e["source"], e["seq"], e["event"]["type"]) for e in envs] == [
            ("c1", 0, "session_started"), ("c1", 1, "turn_started"), ("c1", 2, "text_delta"),
            ("c1", 3, "turn_completed")]

        missing = _agentrt(db, "threads", "show", "nope")
        assert missing.returncode == 1 and "unknown_thread" in missing.stderr

        assert _agentrt(db, "threads", "rm", "proj").returncode == 0
        assert _agentrt(db, "threads", "list").stdout.strip() == "no threads"
        assert _agentrt(db, "threads", "rm", "proj").returncode == 1
        conn = sqlite3.connect(db)
        # The thread's conversation and transcript went with it; the unnamed conversation's stayed.
        assert conn.execute("SELECT id, transcript FROM conversations").fetchall() == [("c2", "c2.atr")]
        conn.close()
        assert sorted(p.name for p in (db.parent / "transcripts").iterdir()) == ["c2.atr"]

    await trio.to_thread.run_sync(cli_part)


async def test_unsupported_url_is_a_clear_error(tmp_path: Path) -> None:
    def run() -> subprocess.CompletedProcess[str]:
        env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
        env["AGENTRT_DATABASE_URL"] = "postgresql://u:secret@h/db"
        return subprocess.run([AGENTRT, "threads", "list"], capture_output=True,
                              text=True, env=env, timeout=60, check=False)

    done = await trio.to_thread.run_sync(run)
    assert done.returncode == 2
    assert "unsupported_database_url" in done.stderr and "secret" not in done.stderr
