"""Tasks per second through ``agentrt control-plane`` and ``agentrt worker`` processes, on loopback.

For each storage backend (SQLite, Redis) and 1, 2 and 4 worker processes (``--slots 2`` each),
the control plane and workers start as real child processes; then :data:`TASKS` tasks of ``true``
are submitted over HTTP and the clock runs until every one is ``success``.  Redis runs start a
private ``redis-server`` (skipped, and said so, when it is not installed).

The control plane's own CPU time per task (user+system of its process over the run) is reported
too: wall-clock rates swing with machine load, CPU time much less.  The load average is printed.

The baseline, in the same run, spawns ``true`` :data:`TASKS` times back to back from this process:
the floor of one process start per task, so ``x baseline`` reads as "how many direct spawns' worth
of tasks per second the whole distributed path sustains".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

AGENTRT = str(Path(sys.executable).parent / "agentrt")
TASKS = 200
WORKER_COUNTS = (1, 2, 4)
SLOTS = 2
API_KEY = "bench-key-0123456789abcdef"
TRUSTED_PATH = "/usr/local/bin:/usr/bin:/bin"
RUN_LIMIT = 180.0


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": TRUSTED_PATH, "LANG": "C.UTF-8", "HOME": "/nonexistent", **extra}


async def _spawn(args: list[str], env: dict[str, str]) -> tuple[trio.Process, dict[str, Any]]:
    process = await trio.lowlevel.open_process(
        [AGENTRT, *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    buffer = b""
    with trio.fail_after(30):
        while b"\n" not in buffer:
            chunk = await process.stdout.receive_some(4096)
            if not chunk:
                raise RuntimeError(f"agentrt {args[0]} exited before it was ready")
            buffer += chunk
    return process, json.loads(buffer.split(b"\n", 1)[0])


async def _stop(processes: list[trio.Process]) -> None:
    with trio.CancelScope(shield=True):
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


def _cpu_seconds(pid: int) -> float:
    # utime + stime of one process (Linux): a cost that machine load does not inflate, unlike wall time.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _one_run(storage: list[str], workers: int, tmp: str) -> tuple[float, float]:
    started: list[trio.Process] = []
    try:
        cp, ready = await _spawn(
            ["control-plane", "--port", "0", *storage], _env(AGENTRT_CONTROL_PLANE_API_KEY=API_KEY)
        )
        started.append(cp)
        url = ready["url"]
        for n in range(workers):
            worker, _ = await _spawn(
                [
                    "worker",
                    "--control-plane",
                    url,
                    "--allow",
                    "true",
                    "--slots",
                    str(SLOTS),
                    "--poll-interval",
                    "0.02",
                    "--work-dir",
                    os.path.join(tmp, f"w{n}-{os.urandom(3).hex()}"),
                ],
                _env(AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN="1", AWP_CONTROL_PLANE_API_KEY=API_KEY),
            )
            started.append(worker)
        headers = {"authorization": f"Bearer {API_KEY}"}
        limits = httpx.Limits(max_connections=8)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as client:
            with trio.fail_after(RUN_LIMIT):
                begin, cpu_begin = time.perf_counter(), _cpu_seconds(cp.pid)
                async with trio.open_nursery() as nursery:
                    for i in range(TASKS):
                        body = {"task_type": "command", "payload": {"argv": ["true"]}, "idempotency_key": f"b{i}"}
                        nursery.start_soon(partial(client.post, "/v1/tasks", json=body))
                while True:
                    done = await client.get("/v1/tasks", params={"status": "success", "limit": TASKS})
                    if len(done.json()) >= TASKS:
                        break
                    await trio.sleep(0.1)  # listing 200 rows is not free: do not starve the server
                elapsed = time.perf_counter() - begin
                cpu_ms = (_cpu_seconds(cp.pid) - cpu_begin) / TASKS * 1000
        return TASKS / elapsed, cpu_ms
    finally:
        await _stop(started)


async def _baseline() -> float:
    exe = shutil.which("true", path=TRUSTED_PATH) or "/bin/true"
    begin = time.perf_counter()
    for _ in range(TASKS):
        await trio.run_process([exe], stdin=subprocess.DEVNULL)
    return TASKS / (time.perf_counter() - begin)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis() -> tuple[subprocess.Popen[bytes], str] | None:
    exe = shutil.which("redis-server")
    if exe is None:
        return None
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={"PATH": TRUSTED_PATH},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if b"Ready to accept connections" in line:
            return proc, f"redis://127.0.0.1:{port}/0"
    proc.kill()
    proc.wait()
    return None


async def _run(tmp: str, redis_url: str | None) -> dict[str, Any]:
    figures: dict[str, Any] = {"tasks": TASKS, "slots_per_worker": SLOTS, "baseline_spawns_per_s": await _baseline()}
    figures["load_before"] = os.getloadavg()[0]
    for backend in ("sqlite", "redis"):
        rates: dict[str, float | None] = {}
        cpu: dict[str, float | None] = {}
        for workers in WORKER_COUNTS:
            if backend == "redis" and redis_url is None:
                rates[str(workers)] = cpu[str(workers)] = None
                continue
            if backend == "sqlite":
                storage = ["--database", os.path.join(tmp, f"bench-{workers}.db")]
            else:
                storage = ["--redis", str(redis_url), "--redis-prefix", f"bench:{workers}:{os.urandom(3).hex()}:"]
            rates[str(workers)], cpu[str(workers)] = await _one_run(storage, workers, tmp)
        figures[backend] = rates
        figures[f"{backend}_control_plane_cpu_ms_per_task"] = cpu
    figures["load_after"] = os.getloadavg()[0]
    return figures


def main() -> dict[str, Any]:
    """Run the benchmark; print the table and return the figures (tasks/s by backend and workers)."""
    redis = _start_redis()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            figures = trio.run(_run, tmp, redis[1] if redis else None)
    finally:
        if redis is not None:
            redis[0].terminate()
            redis[0].wait(10)
            if redis[0].stdout is not None:
                redis[0].stdout.close()
    base = figures["baseline_spawns_per_s"]
    print(f"{TASKS} tasks of `true`, {SLOTS} slots per worker; baseline: direct spawns {base:8.1f}/s")
    print(f"  {'backend':8} " + "".join(f"{f'{n} worker' + ('s' if n > 1 else ''):>22}" for n in WORKER_COUNTS))
    for backend in ("sqlite", "redis"):
        cells = []
        for n in WORKER_COUNTS:
            rate = figures[backend][str(n)]
            cells.append(f"{'not installed':>22}" if rate is None else f"{rate:9.1f}/s ({rate / base:5.2f}x)".rjust(22))
        print(f"  {backend:8} " + "".join(cells))
    print("control-plane CPU per task (its process's user+system time; robust to machine load):")
    for backend in ("sqlite", "redis"):
        costs = figures[f"{backend}_control_plane_cpu_ms_per_task"]
        cells = [f"{'-':>22}" if costs[str(n)] is None else f"{costs[str(n)]:8.2f} ms".rjust(22) for n in WORKER_COUNTS]
        print(f"  {backend:8} " + "".join(cells))
    print(f"load average (1 min): {figures['load_before']:.2f} before, {figures['load_after']:.2f} after")
    return figures


if __name__ == "__main__":
    main()
