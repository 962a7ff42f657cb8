"""Sink throughput: the database sink's store rate, and what attaching it costs the host path.

* ``sqlite_events_per_s``: the benchmark corpus decoded by the stream-json
  codec into its real event mix, handed to the sqlite sink in batches as the
  host path makes them, timed until everything is committed;
* ``host_path_*``: the whole host path (bench/host_path.py's contender: a real
  child replaying the corpus) with a no-op sink, and with the sqlite sink
  attached as well, in the same run; the ratio is what the sink costs.  The
  ``_committed`` figure also waits for the sink's last commit.
* ``sqlite_events_per_s_nice0``: the same with the writer thread at normal
  priority (it runs at nice 10 by default, which only matters under contention);
* ``tui_plain_events_per_s``: the terminal UI sink (plain mode, to /dev/null).

Figures are ratios and rates from one run, never thresholds.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from agentrt import tune_gc

from ._corpus import corpus_module, write_blob
from .host_path import EMIT, PYTHON, _child_env, _NoopSink


def _decode_corpus(blob: bytes) -> list[Any]:
    import orjson

    from agentrt import Plugins

    codec = Plugins(autoload=True).dialect("stream-json").host_codec()
    events: list[Any] = []
    for line in blob.splitlines():
        if line.strip():
            events.extend(codec.decode(orjson.loads(line)))
    return events


def _batches(events: list[Any], size: int) -> list[Any]:
    from agentrt.events import EventBatch

    return [
        EventBatch(source="bench", first_seq=i, mono=0.0, wall=time.time(), events=tuple(events[i : i + size]))
        for i in range(0, len(events), size)
    ]


async def _store(batches: list[Any], db: Path, nice: int = 10) -> float:
    from agentrt_sqlite.api import SqliteSink

    sink = SqliteSink(db, writer_nice=nice)
    start = time.perf_counter()
    for batch in batches:
        await sink.handle(batch)
    await sink.flush()
    elapsed = time.perf_counter() - start
    await sink.aclose()
    return elapsed


async def _tui(batches: list[Any]) -> float:
    from agentrt_tui.api import TuiSink

    with open(os.devnull, "w") as f:
        sink = TuiSink(f, terminal=False)
        start = time.perf_counter()
        for batch in batches:
            await sink.handle(batch)
        await sink.aclose()
        return time.perf_counter() - start


async def _host(path: str, db: Path | None) -> tuple[int, float, float]:
    """(events, seconds until the no-op sink saw them all, seconds until the conversation closed)."""
    from agentrt import LaunchSpec, Plugins, open_conversation

    plugins = Plugins(autoload=True)
    launch = LaunchSpec(executable=PYTHON, prefix_args=(EMIT, path), protocol="stream-json")
    noop = _NoopSink()
    sinks: list[Any] = [noop]
    if db is not None:
        from agentrt_sqlite.api import SqliteSink

        sinks.append(SqliteSink(db))
    start = time.perf_counter()
    async with open_conversation(launch, plugins=plugins, sinks=sinks, parent_env=_child_env()) as conv:
        stream = conv.send("go")
        await stream.__anext__()
        with trio.fail_after(600):
            await noop.done.wait()
        seen = time.perf_counter() - start
    return noop.events, seen, time.perf_counter() - start


def _attach(path: str, tmp: Path, lines: int, repeat: int, tag: str) -> dict[str, float]:
    base: list[tuple[int, float, float]] = []
    with_db: list[tuple[int, float, float]] = []
    for i in range(repeat):  # interleaved, so drift in machine load hits both alike
        base.append(trio.run(_host, path, None))
        with_db.append(trio.run(_host, path, tmp / f"{tag}{i}.db"))
    b = min(r[1] for r in base)
    w = min(r[1] for r in with_db)
    wc = min(r[2] for r in with_db)
    bc = min(r[2] for r in base)
    return {
        "host_path_lines_per_s": lines / b,
        "host_path_with_sqlite_lines_per_s": lines / w,
        "host_path_with_sqlite_ratio": b / w,
        "host_path_with_sqlite_committed_ratio": bc / wc,
    }


def main(repeat: int = 5, n_lines: int = 20_000) -> dict[str, float]:
    """Run the sink benchmarks, print a table, return the figures."""
    corpus = corpus_module()
    blob = corpus.corpus_blob(n_lines)
    lines = blob.count(b"\n")
    events = _decode_corpus(blob)
    batches = _batches(events, 64)
    path = write_blob(blob)
    figures: dict[str, float] = {"corpus_lines": lines, "corpus_events": len(events)}
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-sinks-") as tmp:
        store = min(trio.run(_store, batches, Path(tmp) / f"s{i}.db") for i in range(repeat))
        figures["sqlite_events_per_s"] = len(events) / store
        # The writer runs at nice 10 by default; on a busy machine that alone slows it.
        store0 = min(trio.run(_store, batches, Path(tmp) / f"z{i}.db", 0) for i in range(repeat))
        figures["sqlite_events_per_s_nice0"] = len(events) / store0
        figures["tui_plain_events_per_s"] = len(events) / min(trio.run(_tui, batches) for _ in range(repeat))
        figures.update(_attach(path, Path(tmp), lines, repeat, "h"))
        # Again under the collector settings of the `agentrt` command (tune_gc).
        saved = gc.get_threshold()
        tune_gc()
        try:
            tuned = _attach(path, Path(tmp), lines, repeat, "g")
        finally:
            gc.set_threshold(*saved)
            gc.unfreeze()
        figures.update({f"{key}_tuned_gc": value for key, value in tuned.items()})
        os.unlink(path)
    print(f"sinks (stream-json corpus, {lines} lines, {len(events)} events, best of {repeat})")
    for key, value in figures.items():
        print(f"  {key:50s} {value:14.3f}")
    return figures


if __name__ == "__main__":
    main()
