"""SIGKILL a process mid-stream: the database stays sound and holds a gap-free prefix.

The sink commits about every 100 ms; how much a kill loses is a timing figure
(`python -m bench sinks`), so the test only asserts outcomes: integrity, a
gap-free prefix of what was handed over, and no event held back indefinitely
(anything handed over long before the kill, by a hang-guard margin, is stored).
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
# Not a latency bound: a guard against a sink that never commits (it commits every ~100 ms).
HELD_BACK_GUARD = 10.0


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
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return [r[0] for r in conn.execute("SELECT seq FROM events WHERE source = 'kill' ORDER BY id")]
    finally:
        conn.close()


async def test_sigkill_mid_stream_never_corrupts_and_keeps_a_gap_free_prefix(tmp_path: Path) -> None:
    rng = random.Random()
    db = tmp_path / "k.db"
    for run in range(4):
        # Each run appends to the same file under a fresh source, after a kill.
        if db.exists():
            conn = sqlite3.connect(db)
            conn.execute("DELETE FROM events")
            conn.commit()
            conn.close()
        target = rng.randint(200, 3000)
        kill_wall, records = await _run_and_kill(db, target)
        seqs = await trio.to_thread.run_sync(_check, db)
        stored = len(seqs)
        assert seqs == list(range(stored)), f"run {run}: stored events are not a gap-free prefix"
        handed_total = records[-1][0]
        assert stored <= handed_total
        must_have = max((c for c, w in records if w <= kill_wall - HELD_BACK_GUARD), default=0)
        assert stored >= must_have, (
            f"run {run}: {must_have} events were handed over more than {HELD_BACK_GUARD:.0f} s "
            f"before the kill but only {stored} were stored"
        )
