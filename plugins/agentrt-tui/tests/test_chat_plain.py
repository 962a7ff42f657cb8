"""``agentrt chat`` with stdin and stdout as pipes: plain lines, no escape codes."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import trio

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
SLOW_AGENT = Path(__file__).with_name("slow_agent.py")


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    agent = tmp / "slow-agent"
    agent.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(SLOW_AGENT)!r}, run_name='__main__')\n")
    agent.chmod(0o755)
    env = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
    env.update(HOME=str(tmp), AWP_AGENT_CLI_EXECUTABLE=str(agent), AWP_AGENT_CLI_PROTOCOL="awp-jsonl",
               AGENTRT_DATABASE_URL=f"sqlite://{tmp}/c.db", AGENTRT_LOAD_PLUGINS="awp-jsonl,sqlite,tui")
    env.update(extra)
    return env


def _chat(env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTRT, "chat", *args], input=stdin, capture_output=True, text=True, env=env,
                          timeout=60, check=False)


async def test_piped_chat_plain_output_and_commands(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = await trio.to_thread.run_sync(_chat, env, "hi\n/help\n/usage\n/bogus\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out
    assert "● Bash: ls -la\nreply to: **hi**" in out  # the tool call on a line of its own
    assert "(7 in · 3 out · " in done.stderr  # the footer: not part of the output
    assert "/thread  the thread name" in out and "turns: 1\ninput tokens: 7\noutput tokens: 3" in out
    assert "unknown command /bogus" in out
    # Unnamed chats are recorded too, but are not threads.
    db = sqlite3.connect(tmp_path / "c.db")
    assert db.execute("SELECT count(*) FROM turns").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM threads").fetchone() == (0,)
    db.close()


async def test_no_log_records_nothing(tmp_path: Path) -> None:
    done = await trio.to_thread.run_sync(_chat, _env(tmp_path), "hi\n", "--no-log")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "c.db").exists()


async def test_invalid_stored_session_id_is_not_resumed_and_is_reported(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = await trio.to_thread.run_sync(_chat, env, "one\n", "--thread", "t")
    assert first.returncode == 0, first.stderr
    db = sqlite3.connect(tmp_path / "c.db")
    db.execute("UPDATE threads SET session_id = 'not valid; rm -rf'")
    db.commit()
    db.close()
    again = await trio.to_thread.run_sync(_chat, env, "two\n", "--thread", "t")
    assert again.returncode == 0, again.stderr
    assert "invalid_resume_session_id" in again.stderr
    assert "resumed from" not in again.stdout  # started fresh: no --resume was passed
    assert "rm -rf" not in again.stderr + again.stdout


async def test_launch_errors_are_clear(tmp_path: Path) -> None:
    env = _env(tmp_path, AWP_AGENT_CLI_EXECUTABLE="relative/agent")
    done = await trio.to_thread.run_sync(_chat, env, "")
    assert done.returncode == 2
    assert done.stderr.startswith("agentrt: error: ")
    env = _env(tmp_path, AGENTRT_LOAD_PLUGINS="awp-jsonl,tui")
    done = await trio.to_thread.run_sync(_chat, env, "", "--thread", "x")
    assert done.returncode == 2 and "thread_store_unavailable" in done.stderr


def test_chat_exits_non_zero_when_its_replies_cannot_be_written(tmp_path: Path) -> None:
    # stdout is a pipe nobody reads (`agentrt chat | head -c0`): the reply never
    # reached its sink, so the chat must not end with status 0.
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([AGENTRT, "chat", "--no-log"], input=b"hi\nsecond\n", stdout=write,
                              stderr=subprocess.PIPE, env=_env(tmp_path), timeout=60, check=False)
    finally:
        os.close(write)
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert "agentrt: error: output_closed: stdout was closed; the agent was stopped" in err
    assert "Traceback" not in err
