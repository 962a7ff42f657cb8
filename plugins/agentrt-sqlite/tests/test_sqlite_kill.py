"""SIGKILL a process mid-stream: the database stays sound and the transcript holds a gap-free prefix.

Without a raw tap (this child calls ``handle()`` only) every event is written
to the transcript inside ``handle()``, so everything handed over before the
kill is stored: the test asserts integrity, a gap-free prefix, and that it
holds at least every event the child had handed over when it was killed.
"""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import trio

CHILD = Path(__file__).with_name("_kill_child.py")


def _child_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT", "TMPDIR")
    return {k: os.environ[k] for k in keep if k in os.environ}


async def _run_and_kill(db: Path, target: int) -> tuple[float, list[tuple[int, float]]]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), str(db)], stdout=subprocess.PIPE, env=_child_env()
    )
    assert proc.stdout is not None
    buf = b""
    handed = 0
    try:
        with trio.fail_after(30):
            while handed < target:
                chunk = await proc.stdout.receive_some()
                assert chunk, "the child exited early"
                buf += chunk
                *_, last = [ln for ln in buf.split(b"\n")[:-1]] or [b"0 0"]
                handed = int(last.split()[0])
        kill_wall = time.time()
        proc.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            await proc.wait()
            while chunk := await proc.stdout.receive_some():
                buf += chunk
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
        await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL
    records = []
    for line in buf.split(b"\n"):
        if line.strip():
            count, wall = line.split()
            records.append((int(count), float(wall)))
    return kill_wall, records


def _check(db: Path) -> list[int]:
    from agentrt_sqlite.api import read_events

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    return [env["seq"] for env in read_events(db, "kill")]


async def test_sigkill_mid_stream_never_corrupts_and_keeps_a_gap_free_prefix(tmp_path: Path) -> None:
    rng = random.Random()
    db = tmp_path / "k.db"
    for run in range(4):
        # Each run appends to the same file under a fresh source, after a kill.
        (tmp_path / "transcripts" / "kill.atr").unlink(missing_ok=True)
        target = rng.randint(200, 3000)
        _, records = await _run_and_kill(db, target)
        seqs = await trio.to_thread.run_sync(_check, db)
        stored = len(seqs)
        assert seqs == list(range(stored)), f"run {run}: stored events are not a gap-free prefix"
        handed_total = records[-1][0]
        assert stored <= handed_total
        assert stored >= handed_total, f"run {run}: {handed_total} events were handed over, {stored} stored"
