"""SIGKILL ``agentrt run`` mid-turn, again and again: the index and the transcripts never disagree after it.

Real ``agentrt run`` subprocesses (recording by default, their agent's output
through the raw tap) stream a long reply from a tape agent into one database;
each is killed with SIGKILL at a random point of the reply, the last one runs
to its end.  After every kill the database is opened as a later run would:
every conversation's transcript replays to a gap-free sequence, every turn row
points into its transcript (its start there with the same prompt; once ended,
its terminal event there and its reply the replayed text), and nothing the
index names is missing.  A turn the kill cut short is closed by that open as
``turn_unfinished``, with the reply its transcript kept up to the kill.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import trio

from agentrt.testing import write_tape_agent
from agentrt_sqlite._replay import replay
from agentrt_sqlite._schema import connect
from agentrt_sqlite.api import read_events

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _tape(tmp_path: Path, deltas: int) -> str:
    session = str(uuid.uuid4())
    lines = [{"type": "system", "subtype": "init", "session_id": session, "model": "m"}]
    for i in range(deltas):
        delta = {"type": "text_delta", "text": f"<{i:06d}>" + "k" * 500}
        lines.append({"type": "stream_event", "session_id": session, "uuid": str(uuid.uuid4()),
                      "event": {"type": "content_block_delta", "index": 0, "delta": delta}})
    lines.append({"type": "result", "subtype": "success", "is_error": False, "result": "done",
                  "session_id": session, "usage": {"input_tokens": 3, "output_tokens": 4}})
    tape = tmp_path / "tape.jsonl"
    tape.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return write_tape_agent(tmp_path, tape)


async def _run(tmp_path: Path, agent: str, kill_after: int | None) -> int:
    """One ``agentrt run``; SIGKILLed once its stdout has ``kill_after`` bytes (``None``: to its end)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "AGENTRT_CONFIG": str(tmp_path / "none.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/k.db",
           "AWP_AGENT_CLI_EXECUTABLE": agent, "AWP_AGENT_CLI_PROTOCOL": "stream-json"}
    proc = await trio.lowlevel.open_process([AGENTRT, "run", "go"], stdout=subprocess.PIPE, env=env,
                                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    got = 0
    try:
        with trio.fail_after(120):
            while chunk := await proc.stdout.receive_some():
                got += len(chunk)
                if kill_after is not None and got >= kill_after:
                    proc.send_signal(signal.SIGKILL)
                    break
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
        await proc.stdout.aclose()
    return proc.returncode


def _agree(db_path: Path) -> tuple[int, int]:
    """Check that index and transcripts agree; (turns ended, turns cut short)."""
    ended = cut = 0
    if not db_path.exists():
        return 0, 0  # killed before its first write
    db = connect(db_path)  # as a later run opens it (a kill mid-migration left an older version)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conversations = db.execute("SELECT id, transcript FROM conversations").fetchall()
        for cid, name in conversations:
            path = db_path.parent / "transcripts" / name
            assert path.exists(), f"the index names {name}, which is missing"
            size = path.stat().st_size
            envs = read_events(db_path, cid)
            assert [e["seq"] for e in envs] == list(range(len(envs))), "the replay has a gap"
            events = [e["event"] for e in envs]
            rows = db.execute("SELECT turn, prompt, reply, outcome, first_seq, last_seq, tx_start, tx_end,"
                              " reply_clipped, code FROM turns WHERE conversation_id = ?", (cid,)).fetchall()
            for turn, prompt, reply, outcome, first, last, tx_start, tx_end, clipped, code in rows:
                assert tx_start is not None and 0 < tx_start < size
                assert events[first] == {"type": "turn_started", "turn": turn, "prompt": prompt}
                assert outcome != "running"  # the open above closed a turn its killed writer left running
                if code == "turn_unfinished":
                    cut += 1
                    assert last is None and tx_end == size
                    text = "".join(e["text"] for e in events[first + 1 :] if e["type"] == "text_delta")
                    assert reply == (text[: len(reply)] if clipped else text)
                    assert not clipped or len(text) > len(reply)
                    continue
                ended += 1
                assert tx_end is not None and tx_start < tx_end <= size
                assert events[last]["type"] == ("turn_completed" if outcome == "completed" else "turn_failed")
                text = "".join(e["text"] for e in events[first + 1 : last] if e["type"] == "text_delta")
                # The row keeps the reply up to its cap (64 Ki characters), the transcript all of it.
                assert reply == (text[: len(reply)] if clipped else text) and (not clipped or len(text) > len(reply))
        # Every transcript on disk is one the index names (a file is made only for a conversation it records).
        names = {name for _, name in conversations}
        on_disk = {p.name for p in (db_path.parent / "transcripts").glob("*.atr")}
        # A file the index does not name: a run killed within its first commit interval (documented);
        # it still replays.
        for orphan in on_disk - names:
            envs = list(replay(db_path.parent / "transcripts" / orphan, "orphan"))
            assert [e["seq"] for e in envs] == list(range(len(envs)))
    finally:
        db.close()
    return ended, cut


async def test_sigkill_loop_index_and_transcript_never_disagree(tmp_path: Path) -> None:
    rng = random.Random()
    deltas = 4000
    agent = _tape(tmp_path, deltas)
    reply_bytes = deltas * 508
    kills = 0
    for _ in range(4):
        code = await _run(tmp_path, agent, rng.randint(1, reply_bytes - 1))
        kills += code == -signal.SIGKILL
        await trio.to_thread.run_sync(_agree, tmp_path / "k.db")
    assert await _run(tmp_path, agent, None) == 0
    ended, cut = await trio.to_thread.run_sync(_agree, tmp_path / "k.db")
    # A run killed within its first commit interval may have left no turn row yet (its transcript has it).
    assert ended >= 1 and ended + cut <= 5
    assert kills >= 1  # at least one run was killed mid-turn (the reply is 2 MB; a run that ends first is rare)


async def test_prune_removes_a_transcript_no_row_names_once_it_is_old(tmp_path: Path) -> None:
    """What a run killed in its first commit interval leaves: a file the index never named."""
    from agentrt_sqlite._store import SqliteStore

    agent = _tape(tmp_path, 10)
    assert await _run(tmp_path, agent, None) == 0
    directory = tmp_path / "transcripts"
    [kept] = list(directory.glob("*.atr"))
    old, fresh = directory / "orphan-old.atr", directory / "orphan-fresh.atr"
    for path in (old, fresh):
        path.write_bytes(kept.read_bytes()[:200])
    os.utime(old, (1e9, 1e9))  # untouched for years
    os.utime(kept, (1e9, 1e9))  # named by its conversation: never an orphan, however old the file
    store = SqliteStore(tmp_path / "k.db")
    try:
        report = await store.prune(max_age_days=365 * 100)
    finally:
        await store.aclose()
    assert report.conversations == 0 and report.transcripts == 1
    assert sorted(p.name for p in directory.glob("*.atr")) == sorted([kept.name, fresh.name])
