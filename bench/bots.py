"""One supervisor keeping 500 FastAgent fixture bots running, on this machine.

Each bot is a real process: by default the tiny C fixture
(``plugins/agentrt-fastagent/tests/fixtures/fastagent_fixture.c``, compiled here with the
system C compiler; it prints ``process_started`` and ``running`` and waits
for SIGTERM), else (no compiler, or ``AGENTRT_BENCH_FIXTURE=python``) the stdlib Python
fixture under ``python -S -E``.  ``AGENTRT_BENCH_BOTS`` changes the count.
Every start goes the full way: managed-skills sync, allow-listed
environment, stdout framing, schema validation, the state machine, the
in-memory store and a sink.

Reported: time until all bots are ``running`` and until all are ``stopped``
(a requested stop of every bot at once), parent memory per bot (RSS growth of
this process divided by the bot count), the fixtures' own RSS, and event
latency (the fixture's own timestamp on the ``running`` line to the sink
receiving it), both during the start-up storm and in steady state (one bot
restarted at a time while the other 499 keep running).  The baseline, in the same run, spawns the same fixtures with
bare ``open_process`` and reads their two lines (no supervisor, no store, no
skills), then stops them the same way: ``x baseline`` is the cost of
supervision on top of process management alone.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import trio

ROOT = Path(__file__).resolve().parent.parent
C_SOURCE = ROOT / "plugins" / "agentrt-fastagent" / "tests" / "fixtures" / "fastagent_fixture.c"
PY_FIXTURE = ROOT / "plugins" / "agentrt-fastagent" / "tests" / "fixtures" / "fake_fastagent.py"
BOTS = int(os.environ.get("AGENTRT_BENCH_BOTS", "500"))
STEADY_RESTARTS = 20
LIMIT = 120.0  # every phase is bounded by this


def _rss_kib(pid: int | str = "self") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def build_fixture(directory: Path) -> tuple[Path, str]:
    """The fixture binary to run (compiled C if possible, else Python ``-S -E``)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    binary = directory / "fastagent"
    if cc and C_SOURCE.exists() and os.environ.get("AGENTRT_BENCH_FIXTURE", "c") == "c":
        subprocess.run([cc, "-O2", "-o", str(binary), str(C_SOURCE)], check=True, timeout=120)
        return binary, "c"
    binary.write_text(f"#!{sys.executable} -SE\n" + PY_FIXTURE.read_text())
    binary.chmod(0o755)
    (directory / "fastagent-fixture.json").write_text('{"scenario": "restored_happy", "step_delay_ms": 0}')
    return binary, "python"


def _parse_ts(stamp: str) -> float:
    return _dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC).timestamp()


class _LatencySink:
    name = "bench"
    policy = "block"
    buffer_size = 4096

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.running: set[str] = set()
        self.stopped: set[str] = set()
        self.changed = trio.Event()

    async def handle(self, batch: Any) -> None:
        from agentrt.events import Lifecycle, StateChanged

        for ev in batch.events:
            if isinstance(ev, Lifecycle) and ev.kind == "running" and ev.timestamp:
                self.latencies.append(batch.wall - _parse_ts(ev.timestamp))
            elif isinstance(ev, StateChanged):
                if ev.state == "running":
                    self.running.add(batch.source)
                elif ev.state == "stopped":
                    self.stopped.add(batch.source)
        self.changed.set()
        self.changed = trio.Event()

    async def aclose(self) -> None:
        pass

    async def wait(self, cond: Any) -> None:
        with trio.fail_after(LIMIT):
            while not cond():
                await self.changed.wait()


async def _supervised(binary: Path, work: Path, n: int) -> dict[str, Any]:
    from agentrt_fastagent.api import LlmProfile, MemoryBotStore, SandboxConfig, SupervisorConfig, open_supervisor

    profile = LlmProfile(name="bench", provider="openai", model="m", api_key="bench-key")
    store = MemoryBotStore()
    sink = _LatencySink()
    cfg = SupervisorConfig(
        instances_dir=work / "instances", binary=binary, reconcile_interval=0.5, term_grace=3.0,
        parent_env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )  # fmt: skip
    rss_before = _rss_kib()
    async with open_supervisor(store, config=cfg, resolve=lambda rec: (profile, SandboxConfig()), sinks=[sink]) as sup:
        for i in range(n):
            await sup.add_bot(f"bot{i:04d}")
        t0 = time.perf_counter()
        for i in range(n):  # as `agentrt bots start` does: the reconciler picks it up
            rec = await store.get_bot(f"bot{i:04d}")
            assert rec is not None
            await store.save_bot(attrs.evolve(rec, desired_state="running"))
        sup.wake()
        await sink.wait(lambda: len(sink.running) >= n)
        t_running = time.perf_counter() - t0
        rss_running = _rss_kib()
        child_rss = sum(_rss_kib(p) for b in sup.live_bots() if (p := sup.live_pid(b)))
        live = len(sup.live_bots())
        # Steady state: restart a few bots one at a time while the others keep running.
        storm = list(sink.latencies)
        for i in range(STEADY_RESTARTS):
            count = len(sink.latencies)
            await sup.request_restart(f"bot{i:04d}")
            await sink.wait(lambda count=count: len(sink.latencies) > count)
        steady = sorted(sink.latencies[len(storm) :])
        t1 = time.perf_counter()
        await sup.shutdown()
        await sink.wait(lambda: len(sink.stopped) >= n)
        t_stop = time.perf_counter() - t1
    records = await store.list_bots()
    lat = sorted(storm)
    return {
        "bots": n,
        "live_while_running": live,
        "start_all_s": round(t_running, 3),
        "stop_all_s": round(t_stop, 3),
        "parent_rss_per_bot_kib": round((rss_running - rss_before) / n, 1),
        "fixture_rss_total_mib": round(child_rss / 1024, 1),
        "startup_event_latency_median_ms": round(statistics.median(lat) * 1000, 2) if lat else None,
        "startup_event_latency_p99_ms": round(lat[int(len(lat) * 0.99) - 1] * 1000, 2) if lat else None,
        "steady_event_latency_median_ms": round(statistics.median(steady) * 1000, 2) if steady else None,
        "steady_event_latency_max_ms": round(steady[-1] * 1000, 2) if steady else None,
        "all_stopped_cleanly": all(r.status == "stopped" and r.restart_count == 0 for r in records),
        "steady_restarts": len(steady),
    }


async def _baseline(binary: Path, n: int) -> dict[str, Any]:
    from agentrt.lowlevel import ProcessSpec, open_process

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "IM_GATEWAY_AGENT_ID": "x"}
    spec = ProcessSpec(argv=(str(binary), "--channel", "weixin", "--output", "jsonl"), env=env, stdin=False,
                       shutdown_grace=0.0)  # fmt: skip
    ready = 0
    all_ready = trio.Event()
    stop = trio.Event()
    stopped = 0
    all_stopped = trio.Event()

    async def one() -> None:
        nonlocal ready, stopped
        async with open_process(spec) as proc:
            seen = b""
            while seen.count(b"\n") < 2:
                chunk = await proc.receive_some()
                if not chunk:
                    break
                seen += chunk
            ready += 1
            if ready == n:
                all_ready.set()
            await stop.wait()
            await proc.stop()
        stopped += 1
        if stopped == n:
            all_stopped.set()

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            t0 = time.perf_counter()
            for _ in range(n):
                nursery.start_soon(one)
            await all_ready.wait()
            t_ready = time.perf_counter() - t0
            t1 = time.perf_counter()
            stop.set()
            await all_stopped.wait()
            t_stop = time.perf_counter() - t1
    return {"start_all_s": round(t_ready, 3), "stop_all_s": round(t_stop, 3)}


def main() -> dict[str, Any]:
    """Run the benchmark; print a table; return the figures."""
    work = Path(tempfile.mkdtemp(prefix="agentrt-bench-bots-"))
    try:
        binary, kind = build_fixture(work)
        base = trio.run(_baseline, binary, BOTS)
        sup = trio.run(_supervised, binary, work, BOTS)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "fixture": kind,
        **sup,
        "baseline_start_all_s": base["start_all_s"],
        "baseline_stop_all_s": base["stop_all_s"],
        "start_x_baseline": round(sup["start_all_s"] / base["start_all_s"], 2),
        "stop_x_baseline": round(sup["stop_all_s"] / base["stop_all_s"], 2),
    }
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    return result


if __name__ == "__main__":
    main()
