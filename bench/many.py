"""Many conversations at once: what each live child costs its parent, and how long starting N takes.

Contenders, each run in a fresh interpreter (so that one contender's freed
memory cannot make the next look cheap), interleaved round by round:

* ``bare``: ``trio.lowlevel.open_process`` with three pipes, one task per
  child waiting for its exit (the baseline);
* ``spawn``: ``agentrt.lowlevel.open_owned_process`` (children forked by the
  spawn servers, with the death signal), otherwise as ``bare``;
* ``process``: ``agentrt.lowlevel.open_process`` (stderr drain and exit watch
  through the run's one watcher, bounded stop);
* ``conversation``: ``agentrt.open_conversation`` over awp-jsonl with no sink.

Every child is a fixture agent that reads its stdin to the end and exits,
holding its stdout open meanwhile, as a live idle agent does (a ``/bin/sh``
``read`` loop); ``AGENTRT_BENCH_STDOUT=closed`` gives the earlier fixture,
which closes its stdout at once (``exec cat >/dev/null``), so that the host
sees the end of the output while the child lives on.  Per run: ``start_s``, the seconds from the
first spawn to all N children live (all N started concurrently); then, with
all of them live, ``rss_kib_per_child`` (the parent's RSS growth over an idle
parent that imported the same modules, divided by N) and ``fds_per_child``
(descriptors in /proc/self/fd likewise); then all are stopped and reaped.
``AGENTRT_BENCH_CHILDREN`` sets N (default 1,000), ``AGENTRT_BENCH_ROUNDS``
the rounds (default 5).  Ratios are to ``bare`` in the same rounds.  With
``AGENTRT_BENCH_BEFORE=<source tree>`` (for example an exported older commit),
``spawn_before`` and ``conversation_before`` run that tree's code in the same rounds.

Every contender runs with the same collector settings: CPython's own by
default, which is what a program that calls ``open_conversation`` gets
unless it calls :func:`agentrt.tune_gc` itself (only the ``agentrt``
command does); ``AGENTRT_BENCH_GC=tuned`` applies ``tune_gc()`` in every
contender instead.  Each run also reports ``gc_s``, the seconds its
collections took while the N children started.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from ._rounds import Figures, interleave, load_text, print_summary, summarize

KEYS = ("start_s", "rss_kib_per_child", "fds_per_child", "gc_s")
CONTENDERS = ("bare", "spawn", "process", "conversation")


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _child_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin"}


async def _close_and_wait(proc: Any) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        await stream.aclose()
    await proc.wait()


async def _hold_all(kind: str, n: int, agent: str) -> Figures:
    import trio

    from agentrt import LaunchSpec, Plugins, open_conversation
    from agentrt.lowlevel import ProcessSpec, open_owned_process, open_process

    plugins = Plugins(autoload=True)
    dialect = plugins.dialect("awp-jsonl")
    policy = plugins.permission_policy()
    launch = LaunchSpec(executable=agent, protocol="awp-jsonl")
    spec = ProcessSpec(argv=(agent,), env=_child_env())
    pipe = subprocess.PIPE
    live = 0
    all_live = trio.Event()
    release = trio.Event()

    def started() -> None:
        nonlocal live
        live += 1
        if live == n:
            all_live.set()

    async def one() -> None:
        if kind == "bare":
            proc = await trio.lowlevel.open_process([agent], stdin=pipe, stdout=pipe, stderr=pipe,
                                                    env=_child_env(), start_new_session=True)
            started()
            await release.wait()
            await _close_and_wait(proc)
        elif kind == "spawn":
            owned = await open_owned_process([agent], env=_child_env(), stdin=pipe)
            started()
            await release.wait()
            await _close_and_wait(owned)
        elif kind == "process":
            async with open_process(spec):
                started()
                await release.wait()
        else:
            async with open_conversation(launch, dialect=dialect, permission_policy=policy,
                                         parent_env=_child_env()):
                started()
                await release.wait()

    # The idle parent: every module imported, trio running, nothing spawned yet.
    await trio.sleep(0)
    collecting = [0.0, 0.0]  # seconds in collections so far, the current one's start

    def timed(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collecting[1] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - collecting[1]

    gc.callbacks.append(timed)
    rss0, fds0 = _rss_kib(), _fds()
    async with trio.open_nursery() as nursery:
        start = time.perf_counter()
        for _ in range(n):
            nursery.start_soon(one)
        with trio.fail_after(600):
            await all_live.wait()
        elapsed = time.perf_counter() - start
        gc.callbacks.remove(timed)
        rss1, fds1 = _rss_kib(), _fds()
        release.set()
    return {"start_s": elapsed, "rss_kib_per_child": (rss1 - rss0) / n, "fds_per_child": (fds1 - fds0) / n,
            "gc_s": collecting[0]}


def _one(kind: str, n: int, agent: str) -> None:
    import trio

    if os.environ.get("AGENTRT_BENCH_GC") == "tuned":
        from agentrt import tune_gc

        tune_gc()

    print(json.dumps(trio.run(_hold_all, kind.removesuffix("_before"), n, agent)))


def _fixture_agent(directory: str, stdout: str) -> str:
    # Reads its stdin to the end (so a stop ends it at once) and ignores its flags.
    path = os.path.join(directory, "fixture-agent")
    body = "exec cat >/dev/null" if stdout == "closed" else "while read -r _; do :; done"
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\n{body}\n")
    os.chmod(path, 0o755)
    return path


def main() -> dict[str, Any]:
    n = int(os.environ.get("AGENTRT_BENCH_CHILDREN", "1000"))
    rounds = int(os.environ.get("AGENTRT_BENCH_ROUNDS", "5"))
    stdout = os.environ.get("AGENTRT_BENCH_STDOUT", "open")
    if stdout not in ("open", "closed"):
        raise SystemExit("AGENTRT_BENCH_STDOUT must be 'open' or 'closed'")
    collector = os.environ.get("AGENTRT_BENCH_GC", "default")
    if collector not in ("default", "tuned"):
        raise SystemExit("AGENTRT_BENCH_GC must be 'default' or 'tuned'")
    print(f"many: {n} children per run, {rounds} rounds, child stdout {stdout}, collector {collector} "
          f"in every contender; {load_text()}")
    with tempfile.TemporaryDirectory() as tmp:
        agent = _fixture_agent(tmp, stdout)

        before = os.environ.get("AGENTRT_BENCH_BEFORE")
        kinds = CONTENDERS + (("spawn_before", "conversation_before") if before else ())

        def contender(kind: str) -> Any:
            env = None
            if kind.endswith("_before") and before:
                # That tree's core first on the path; the plugins stay the installed ones.
                env = {**os.environ, "PYTHONPATH": os.path.join(before, "src")}

            def run() -> Figures:
                out = subprocess.run([sys.executable, "-m", "bench.many", "--one", kind, str(n), agent],
                                     capture_output=True, check=True, timeout=900, env=env)
                figures: Figures = json.loads(out.stdout.decode().strip().splitlines()[-1])
                return figures

            return run

        runs = interleave({kind: contender(kind) for kind in kinds}, rounds)
    summary = summarize(runs, "bare", KEYS)
    summary["children"] = n
    summary["child_stdout"] = stdout
    summary["collector"] = collector
    print_summary(f"many children (end to end, {n} per run, child stdout {stdout}; ratios to bare in the same rounds)",
                  summary)
    return summary


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        _one(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
