"""Sink throughput: the recorder as ``agentrt run`` records by default, and what attaching it costs the host path.

The recorded path is the raw tap plus the index: every chunk read from the
agent's stdout is appended to the conversation's transcript by the sink's
:class:`~agentrt.lowlevel.RawTap`, and ``handle()`` then writes only what a
replay cannot decode again (turn starts and ends, sessions, exits: ``E``
records) and queues the index rows.  Both halves are measured here:

* ``recorded_events_per_s``: the benchmark corpus as one turn (the whole-process
  bench's session: its ``result`` lines moved to one at the end) cut into
  64 KiB reads (the host path's read size), each chunk handed to the tap,
  then its decoded events to ``handle()`` in one batch (as the host loop
  does), timed until the turn's row is committed; ``recorded_e_share`` is the share
  of events written as ``E`` records (the rest are replayed from the output);
* ``recorded_events_per_s_nice0``: the same with the writer thread at normal
  priority (it runs at nice 10 by default, which only matters under contention);
* ``host_path_*``: the whole host path (bench/host_path.py's contender: a real
  child replaying the corpus) with a no-op sink, and with the recorder that
  ``run`` opens (the ``recorder`` role's factory, its default options; it taps
  the process) attached as well, in the same run; the ratio is what recording
  costs.  The ``_committed`` figure also waits for the recorder's last commit.
  Each recorded run's transcript is checked to hold the agent's output;
* ``tui_plain_events_per_s``: the terminal UI sink (plain mode, to /dev/null).

Figures are ratios and rates from one run, never thresholds; the load is printed.
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

from ._corpus import write_blob
from ._rounds import load_text
from .host_path import EMIT, PYTHON, _child_env, _NoopSink
from .whole_process import session_blob

#: One read's worth of chunk bytes and the events decoded from the lines it completed.
Read = tuple[bytes, tuple[Any, ...]]


def _reads(blob: bytes) -> list[Read]:
    """The corpus as the host path reads it: 64 KiB chunks, each with the events of the lines it ends."""
    import orjson

    from agentrt import Plugins
    from agentrt.lowlevel import READ_SIZE

    codec = Plugins(autoload=True).dialect("stream-json").host_codec()
    reads: list[Read] = []
    rest = b""
    for at in range(0, len(blob), READ_SIZE):
        chunk = blob[at : at + READ_SIZE]
        *lines, rest = (rest + chunk).split(b"\n")
        events: list[Any] = []
        for line in lines:
            if line.strip():
                events.extend(codec.decode(orjson.loads(line)))
        reads.append((chunk, tuple(events)))
    return reads


async def _record(reads: list[Read], db: Path, nice: int = 10) -> tuple[float, int, int]:
    """(seconds until committed, events handed, events written as ``E`` records) for one recorded turn."""
    import orjson

    from agentrt.events import EventBatch, TurnStarted
    from agentrt.lowlevel import TapInfo
    from agentrt_sqlite.api import ConversationInfo, SqliteSink

    sink = SqliteSink(db, writer_nice=nice, info=ConversationInfo(dialect="stream-json"))
    source = "bench"
    seq = 0

    async def batch(events: tuple[Any, ...]) -> None:
        nonlocal seq
        await sink.handle(EventBatch(source=source, first_seq=seq, mono=time.monotonic(), wall=time.time(),
                                     events=events))
        seq += len(events)

    start = time.perf_counter()
    tap = sink.open_tap(TapInfo(conversation_id=source, dialect="stream-json", process=1, pid=None))
    assert tap is not None, "the recorder declined to tap"
    await batch((TurnStarted(turn=1, prompt="go"),))
    tap.agent_input(b'{"type":"user"}\n')
    for chunk, events in reads:
        tap.agent_output(chunk)
        if events:
            await batch(events)
    tap.close()
    await sink.flush()
    elapsed = time.perf_counter() - start
    await sink.aclose()
    from agentrt_sqlite.api import read_records

    marked = sum(len(orjson.loads(p)["events"]) for _, _, _, p in read_records(
        db.parent / "transcripts" / f"{source}.atr", kinds=b"E"))
    return elapsed, seq, marked


async def _tui(batches: list[Any]) -> float:
    from agentrt_tui.api import TuiSink

    with open(os.devnull, "w") as f:
        sink = TuiSink(f, terminal=False)
        start = time.perf_counter()
        for batch in batches:
            await sink.handle(batch)
        await sink.aclose()
        return time.perf_counter() - start


def _recorder(db: Path) -> Any:
    """The recorder ``agentrt run`` opens (the ``recorder`` role's factory, as ``run`` calls it), default options."""
    from agentrt import Plugins

    factory = Plugins(autoload=True).sink_for("recorder")
    assert factory is not None, "no recorder plugin installed"
    options = {"env": {"AGENTRT_DATABASE_URL": f"sqlite://{db}"}, "thread": None, "dialect": "stream-json",
               "executable": PYTHON, "model": None, "agent": None, "continues": None}
    return factory(options)


async def _host(path: str, db: Path | None) -> tuple[int, float, float]:
    """(events, seconds until the no-op sink saw them all, seconds until the conversation closed)."""
    from agentrt import LaunchSpec, Plugins, open_conversation

    plugins = Plugins(autoload=True)
    launch = LaunchSpec(executable=PYTHON, prefix_args=(EMIT, path), protocol="stream-json")
    noop = _NoopSink()
    sinks: list[Any] = [noop]
    if db is not None:
        sinks.append(_recorder(db))
    start = time.perf_counter()
    async with open_conversation(launch, plugins=plugins, sinks=sinks, parent_env=_child_env()) as conv:
        stream = conv.send("go")
        await stream.__anext__()
        with trio.fail_after(600):
            await noop.done.wait()
        seen = time.perf_counter() - start
    if db is not None:
        _check_tapped(db, conv.id)
    return noop.events, seen, time.perf_counter() - start


def _check_tapped(db: Path, conversation: str) -> None:
    # The figure is the recorded path only if the output went through the tap.
    from agentrt_sqlite.api import read_records, transcript_name

    kinds = {kind for kind, _, _, _ in read_records(db.parent / "transcripts" / transcript_name(conversation))}
    assert b"O" in kinds, f"the recorder did not tap the agent's output: {sorted(kinds)}"


def _attach(path: str, tmp: Path, lines: int, repeat: int, tag: str) -> dict[str, float]:
    base: list[tuple[int, float, float]] = []
    with_db: list[tuple[int, float, float]] = []
    for i in range(repeat):  # interleaved, so drift in machine load hits both alike
        base.append(trio.run(_host, path, None))
        work = tmp / f"{tag}{i}"  # a fresh directory each: its own database and transcripts
        work.mkdir()
        with_db.append(trio.run(_host, path, work / "agentrt.db"))
    b = min(r[1] for r in base)
    w = min(r[1] for r in with_db)
    wc = min(r[2] for r in with_db)
    bc = min(r[2] for r in base)
    return {
        "host_path_lines_per_s": lines / b,
        "host_path_recorded_lines_per_s": lines / w,
        "host_path_recorded_ratio": b / w,
        "host_path_recorded_committed_ratio": bc / wc,
    }


def _fresh(tmp: Path, name: str) -> Path:
    work = tmp / name
    work.mkdir()
    return work / "agentrt.db"


def main(repeat: int = 5, n_lines: int = 20_000) -> dict[str, float]:
    """Run the sink benchmarks, print a table, return the figures."""
    from agentrt.events import EventBatch

    blob = session_blob(n_lines)
    lines = blob.count(b"\n")
    reads = _reads(blob)
    n_events = sum(len(events) for _, events in reads)
    assert type(reads[-1][1][-1]).__name__ == "TurnCompleted", "the session ends its turn"
    path = write_blob(blob)
    figures: dict[str, float] = {"corpus_lines": lines, "corpus_events": n_events}
    load_before = load_text()
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-sinks-") as tmp_dir:
        tmp = Path(tmp_dir)
        runs = [trio.run(_record, reads, _fresh(tmp, f"s{i}")) for i in range(repeat)]
        figures["recorded_events_per_s"] = runs[0][1] / min(r[0] for r in runs)
        figures["recorded_e_share"] = runs[0][2] / runs[0][1]
        # The writer runs at nice 10 by default; on a busy machine that alone slows it.
        runs0 = [trio.run(_record, reads, _fresh(tmp, f"z{i}"), 0) for i in range(repeat)]
        figures["recorded_events_per_s_nice0"] = runs0[0][1] / min(r[0] for r in runs0)
        batches = [EventBatch(source="bench", first_seq=0, mono=0.0, wall=0.0, events=events)
                   for _, events in reads if events]
        figures["tui_plain_events_per_s"] = n_events / min(trio.run(_tui, batches) for _ in range(repeat))
        figures.update(_attach(path, tmp, lines, repeat, "h"))
        # Again under the collector settings of the `agentrt` command (tune_gc).
        saved = gc.get_threshold()
        tune_gc()
        try:
            tuned = _attach(path, tmp, lines, repeat, "g")
        finally:
            gc.set_threshold(*saved)
            gc.unfreeze()
        figures.update({f"{key}_tuned_gc": value for key, value in tuned.items()})
        os.unlink(path)
    print(f"sinks (stream-json corpus, {lines} lines, {n_events} events, best of {repeat}; "
          f"{load_before} before, {load_text()} after)")
    for key, value in figures.items():
        print(f"  {key:50s} {value:14.3f}")
    return figures


if __name__ == "__main__":
    main()
