"""Host-path throughput: agentrt vs the Claude Agent SDK vs a bare trio loop, in one run.

Every contender reads the same corpus from a real child process (bench/_emit.py,
which waits for one input line and then writes the file in 1 MiB writes):

* ``bare``: trio.lowlevel.open_process, receive_some, split on newlines (the ceiling);
* ``agentrt``: open_conversation over the dialect, framing, decode, turn rules,
  fan-out to a no-op sink (the whole host path);
* ``sdk``: claude-agent-sdk's SubprocessCLITransport plus its parse_message, under
  asyncio (its native loop).

Every contender is timed the same way, from spawn to reap, and the contenders
run interleaved round by round (bench/_rounds.py): medians with ranges, and
ratios to a baseline measured in the same rounds, never absolute thresholds.
The machine load is printed beside every run.
"""

from __future__ import annotations

import asyncio
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from ._corpus import corpus_module, write_blob
from ._rounds import Figures, interleave, load_text, print_summary, summarize

EMIT = str(Path(__file__).resolve().parent / "_emit.py")
PYTHON = os.path.realpath(sys.executable)


def _child_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


async def bare_loop(path: str) -> tuple[int, float]:
    """Lines counted by a bare trio read-and-split loop, and the seconds it took (spawn to reap)."""
    start = time.perf_counter()
    proc = await trio.lowlevel.open_process([PYTHON, EMIT, path], stdin=-1, stdout=-1, env=_child_env())
    assert proc.stdin is not None and proc.stdout is not None
    await proc.stdin.send_all(b"{}\n")
    lines = 0
    tail = b""
    while True:
        chunk = await proc.stdout.receive_some(1 << 20)
        if not chunk:
            break
        parts = (tail + chunk).split(b"\n")
        tail = parts.pop()
        lines += len(parts)
    await proc.wait()
    return lines, time.perf_counter() - start


@functools.cache
def _process_exited() -> type:
    from agentrt.events import ProcessExited

    return ProcessExited


class _NoopSink:
    name = "noop"
    policy = "block"
    buffer_size = 1024

    def __init__(self) -> None:
        self.events = 0
        self.done = trio.Event()

    async def handle(self, batch: Any) -> None:
        # The class is looked up once, not imported per batch (an import statement
        # per call was 1.6% of the small-delta run's samples: the bench's, not agentrt's).
        self.events += len(batch.events)
        if type(batch.events[-1]) is _process_exited():
            self.done.set()

    async def aclose(self) -> None:
        pass


async def agentrt_path(path: str, protocol: str, sink_factory: Any = None) -> tuple[int, float, float]:
    """(events seen, seconds, parent CPU seconds) for the whole host path over ``path``."""
    from agentrt import LaunchSpec, Plugins, open_conversation

    plugins = Plugins(autoload=True)
    launch = LaunchSpec(executable=PYTHON, prefix_args=(EMIT, path), protocol=protocol)
    noop = _NoopSink()
    sinks: list[Any] = [noop]
    if sink_factory is not None:
        sinks.append(sink_factory())
    cpu0 = time.process_time()
    start = time.perf_counter()
    async with open_conversation(launch, plugins=plugins, sinks=sinks, parent_env=_child_env()) as conv:

        async def consume() -> None:
            # As an embedding caller does: read the turn's events as they come
            # (an unread turn would keep every event alive).
            async for _ in conv.send("go").batches():
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            with trio.fail_after(600):
                await noop.done.wait()
    # Leaving the block stopped and reaped the child: spawn to reap, as for the others.
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    return noop.events, elapsed, cpu


def sdk_path(path: str) -> tuple[int, float, float]:
    """(messages, seconds from spawn to reap, parent CPU seconds): the SDK's transport + parse_message."""
    from claude_agent_sdk import ClaudeAgentOptions
    from claude_agent_sdk._internal.message_parser import parse_message
    from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

    os.environ.setdefault("CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK", "1")
    script = Path(path).with_suffix(".sh-free-launcher")
    # The SDK execs cli_path with its own flags; a tiny Python launcher ignores them.
    script.write_text(
        f"#!{PYTHON}\nimport runpy, sys\nsys.argv = [{EMIT!r}, {path!r}]\n"
        f"runpy.run_path({EMIT!r}, run_name='__main__')\n"
    )
    script.chmod(0o755)

    async def go() -> tuple[int, float, float]:
        options = ClaudeAgentOptions(cli_path=str(script), max_buffer_size=8 * 1024 * 1024)
        cpu0 = time.process_time()
        start = time.perf_counter()
        transport = SubprocessCLITransport(prompt="", options=options)
        await transport.connect()
        await transport.write('{"type":"user"}\n')
        n = 0
        async for data in transport.read_messages():
            try:
                parse_message(data)
            except Exception:
                pass  # unknown shapes: the SDK raises, counted like parsed
            n += 1
        await transport.close()
        return n, time.perf_counter() - start, time.process_time() - cpu0

    try:
        return asyncio.run(go())
    finally:
        script.unlink(missing_ok=True)



def _lines_cpu(codec: Any, chunks: list[bytes], then: Any = None) -> float:
    """Parent CPU of reading ``chunks`` through ``codec.decode_lines``, as the pump does; ``then`` gets the events."""
    from agentrt.lowlevel import JsonlReader

    reader = JsonlReader()

    def general(line: bytes) -> list[Any]:
        # The corpus has no malformed line: each parsed object decoded, as the pump does.
        return [ev for obj in reader.parse(line) for ev in codec.decode(obj)]

    t0 = time.process_time()
    for chunk in chunks:
        lines = reader.feed_lines(chunk)
        if lines:
            events = codec.decode_lines(lines, general)
            if then is not None:
                then(events)
    return time.process_time() - t0

def inprocess_costs(blob: bytes, protocol: str, repeat: int = 5) -> dict[str, float]:
    """CPU µs per line, in this process, of the host path's pure part and of orjson alone.

    The pure part is framing, decoding and the turn rules, fed 64 KiB chunks (the
    read size), exactly as the pump does; orjson.loads over the same lines is the
    floor no JSON host can go under.  Both are measured interleaved, best of
    ``repeat``, so the ratio holds on a loaded machine even when the absolute
    figures drift.
    """
    import orjson

    from agentrt import Plugins
    from agentrt.lowlevel import JsonlReader, TurnRules

    plugins = Plugins(autoload=True)
    dialect = plugins.dialect(protocol)
    lines = [line for line in blob.split(b"\n") if line]
    chunks = [blob[i : i + 65536] for i in range(0, len(blob), 65536)]

    def host() -> float:
        # As the pump does: each chunk's lines to the codec's decode_lines.
        rules = TurnRules()
        rules.input_sent()  # a turn was sent: no output_before_input path
        return _lines_cpu(dialect.host_codec(), chunks, rules.apply)

    def batch_host() -> float:
        # The plain parse (orjson over every line of a chunk) and decode per object:
        # what a codec's decode_lines is measured against.
        rules = TurnRules()
        rules.input_sent()
        codec = dialect.host_codec()
        decode = codec.decode
        reader = JsonlReader()
        t0 = time.process_time()
        for chunk in chunks:
            objs = reader.feed(chunk)
            if objs:
                rules.apply([ev for obj in objs for ev in decode(obj)])
        return time.process_time() - t0

    def floor() -> float:
        loads = orjson.loads
        t0 = time.process_time()
        for line in lines:
            loads(line)
        return time.process_time() - t0

    best_host = best_floor = best_batch = float("inf")
    for _ in range(repeat):
        best_host = min(best_host, host())
        best_batch = min(best_batch, batch_host())
        best_floor = min(best_floor, floor())
    n = len(lines)
    return {
        "inprocess_us_per_line": best_host / n * 1e6,
        "orjson_us_per_line": best_floor / n * 1e6,
        "inprocess_vs_orjson": best_host / best_floor,
        "plain_us_per_line": best_batch / n * 1e6,
        "lines_vs_plain": best_host / best_batch,
    }


def event_build_costs(repeat: int = 7, n: int = 100_000) -> dict[str, float]:
    """CPU ns per TextDelta built three ways over distinct texts, in lists of 256 as chunks hold them.

    The attrs constructor, :func:`agentrt.dialect.make_text_delta` (one call
    that fills the slots) and :func:`agentrt.dialect.text_delta_slots` inline
    (no call), interleaved, best of ``repeat``; the loop around them is
    measured alone and taken off.
    """
    from agentrt.dialect import make_text_delta, text_delta_slots
    from agentrt.events import TextDelta

    chunks = [[f"piece {i}" for i in range(start, start + 256)] for start in range(0, n, 256)]
    n = 256 * len(chunks)
    raw = b"{}"
    new, set_text, set_index, set_raw = text_delta_slots()

    def loop() -> None:
        for texts in chunks:
            out: list[Any] = []
            append = out.append
            for text in texts:
                append(text)

    def attrs_init() -> None:
        for texts in chunks:
            out: list[Any] = []
            append = out.append
            for text in texts:
                append(TextDelta(text=text, index=1, raw=raw))

    def helper() -> None:
        make = make_text_delta
        for texts in chunks:
            out: list[Any] = []
            append = out.append
            for text in texts:
                append(make(text, 1, raw))

    def inline() -> None:
        for texts in chunks:
            out: list[Any] = []
            append = out.append
            for text in texts:
                event = new()
                set_text(event, text)
                set_index(event, 1)
                set_raw(event, raw)
                append(event)

    runs = {"loop": loop, "attrs_init": attrs_init, "make_text_delta": helper, "text_delta_slots": inline}
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            t0 = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - t0)
    base = best.pop("loop")
    return {f"event_build_ns_{name}": (seconds - base) / n * 1e9 for name, seconds in best.items()}


def mix_lines_costs(blob: bytes, repeat: int = 5) -> dict[str, float]:
    """CPU µs per mix line of stream-json's pure host path: ``decode_lines`` vs the plain parse.

    ``decode_lines`` types every line kind the CLI prints (tool payloads kept as
    bytes); the plain parse is orjson into dicts and ``decode`` per object.
    Interleaved, best of ``repeat``.
    """
    from agentrt import Plugins
    from agentrt.lowlevel import JsonlReader

    dialect = Plugins(autoload=True).dialect("stream-json")
    chunks = [blob[i : i + 65536] for i in range(0, len(blob), 65536)]

    def lines() -> float:
        return _lines_cpu(dialect.host_codec(), chunks)

    def plain() -> float:
        codec = dialect.host_codec()
        reader = JsonlReader()
        t0 = time.process_time()
        for chunk in chunks:
            objs = reader.feed(chunk)
            if objs:
                [ev for obj in objs for ev in codec.decode(obj)]
        return time.process_time() - t0

    best_lines = best_plain = float("inf")
    for _ in range(repeat):
        best_lines = min(best_lines, lines())
        best_plain = min(best_plain, plain())
    n = blob.count(b"\n")
    return {
        "mix_typed_us_per_line": best_lines / n * 1e6,
        "mix_plain_us_per_line": best_plain / n * 1e6,
        "mix_typed_vs_plain": best_lines / best_plain,
    }


def orjson_seconds(blob: bytes, repeat: int = 5) -> float:
    """CPU seconds orjson.loads takes over every line of ``blob`` (best of ``repeat``).

    With the bare loop's wall time this gives the ceiling of any host that
    parses every line: the bare loop already holds the reading, the splitting
    and the wait for the child, and a single-threaded host cannot parse while
    it does those.
    """
    import orjson

    loads = orjson.loads
    lines = [line for line in blob.split(b"\n") if line]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for line in lines:
            loads(line)
        best = min(best, time.process_time() - t0)
    return best


def held_event_bytes(blob: bytes, protocol: str) -> dict[str, float]:
    """Bytes of memory per text-delta event still held after decoding, ``decode_lines`` vs plain parse.

    A caller that keeps a turn's events (``TurnStream.result()`` does) keeps
    each event's ``raw``: the parsed dicts with the plain parse, the line's
    bytes with the typed one (until ``raw`` is read).  Measured with
    tracemalloc, holding every event of ``blob``.
    """
    import tracemalloc

    from agentrt import Plugins
    from agentrt.lowlevel import JsonlReader

    dialect = Plugins(autoload=True).dialect(protocol)
    chunks = [blob[i : i + 65536] for i in range(0, len(blob), 65536)]

    def held(typed: bool) -> tuple[float, int]:
        codec = dialect.host_codec()
        reader = JsonlReader()

        def general(line: bytes) -> list[Any]:
            # The corpus has no malformed line: each parsed object decoded, as the pump does.
            return [ev for obj in reader.parse(line) for ev in codec.decode(obj)]

        events: list[Any] = []
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for chunk in chunks:
            if typed:  # the host path: the chunk's lines to decode_lines
                events.extend(codec.decode_lines(reader.feed_lines(chunk), general))
            else:
                events.extend(ev for obj in reader.feed(chunk) for ev in codec.decode(obj))
        used = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        texts.append(sum(sys.getsizeof(ev.text) for ev in events if hasattr(ev, "text")) / len(events))
        return used / len(events), len(events)

    texts: list[float] = []
    typed, n_typed = held(True)
    plain, n_plain = held(False)
    assert n_typed == n_plain
    return {
        "held_bytes_per_event_typed": typed,
        "held_bytes_per_event_plain": plain,
        "held_typed_vs_plain": typed / plain,
        # What an event costs beyond its text (the str object itself): the constant.
        "held_text_bytes_per_event": texts[0],
        "held_over_text_bytes_per_event_typed": typed - texts[0],
    }


def _awp_lines(small: bytes) -> bytes:
    # The same deltas as an awp-jsonl agent writes them: the bare raw API event.
    import orjson

    return b"".join(orjson.dumps(orjson.loads(line)["event"]) + b"\n" for line in small.splitlines())


def _figures(lines: int, run: tuple[int, float] | tuple[int, float, float]) -> Figures:
    figures: Figures = {"lines_per_s": lines / run[1], "wall_s": run[1]}
    if len(run) == 3:
        figures["cpu_us_per_line"] = run[2] / lines * 1e6
    return figures


class _CollectorClock:
    """Counts the cyclic collector's runs and their wall time (gc.callbacks), while installed."""

    def __init__(self) -> None:
        self.runs = 0
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.runs += 1
            self.seconds += time.perf_counter() - self._start


def _collected(lines: int, run: Callable[[], tuple[int, float, float]], tuned: bool) -> Figures:
    """One agentrt run's figures plus the collector's share; with ``tuned``, under :func:`agentrt.tune_gc`.

    The tuned settings are applied for this run only and undone after it, so
    default and tuned runs interleave in the same rounds (a second half run
    after the first would also measure the order and the process's age).
    """
    import gc

    from agentrt import tune_gc

    clock = _CollectorClock()
    previous = tune_gc() if tuned else None
    gc.callbacks.append(clock)
    try:
        figures = _figures(lines, run())
    finally:
        gc.callbacks.remove(clock)
        if previous is not None:
            gc.unfreeze()
            gc.set_threshold(*previous)
    figures["gc_ms"] = clock.seconds * 1e3
    figures["gc_runs"] = clock.runs
    return figures


def _fixed(run: tuple[int, float] | tuple[int, float, float]) -> Figures:
    figures: Figures = {"wall_ms": run[1] * 1e3}
    if len(run) == 3:
        figures["cpu_ms"] = run[2] * 1e3
    return figures


def _fixed_costs(rounds: int, tiny_path: str, label: str) -> dict[str, Any]:
    """What one run costs whatever its length: spawn, start, stop and reap around 10 delta lines.

    Measured in the bench's own process, which holds the corpora (hundreds of
    MB): a spawn that forks the parent pays for its page tables, as it does in
    the per-line figures above.
    """
    runs: dict[str, Callable[[], Figures]] = {
        "agentrt_10_lines": lambda: _fixed(trio.run(agentrt_path, tiny_path, "stream-json")),
    }
    try:
        import claude_agent_sdk  # noqa: F401
    except ImportError:
        return {}
    runs["sdk_10_lines"] = lambda: _fixed(sdk_path(tiny_path))
    done = interleave(runs, rounds, label=f"{label}10-line ")
    return summarize(done, "sdk_10_lines", ("wall_ms", "cpu_ms"))


def _measure(rounds: int, blob: bytes, path: str, small: bytes, small_path: str, awp_path: str,
             label: str, tiny_path: str = "") -> dict[str, Any]:
    """Both profiles, each contender interleaved round by round; medians, ranges and ratios."""
    lines = blob.count(b"\n")
    small_lines = small.count(b"\n")

    def host(n: int, file: str, protocol: str = "stream-json", tuned: bool = False) -> Callable[[], Figures]:
        return lambda: _collected(n, lambda: trio.run(agentrt_path, file, protocol), tuned)

    mix: dict[str, Callable[[], Figures]] = {
        "bare": lambda: _figures(lines, trio.run(bare_loop, path)),
        "agentrt": host(lines, path),
        "agentrt_tuned_gc": host(lines, path, tuned=True),
    }
    small_runs: dict[str, Callable[[], Figures]] = {
        "bare_small": lambda: _figures(small_lines, trio.run(bare_loop, small_path)),
        "agentrt_small": host(small_lines, small_path),
        "agentrt_small_tuned_gc": host(small_lines, small_path, tuned=True),
        "agentrt_small_awp_jsonl": host(small_lines, awp_path, "awp-jsonl"),
    }
    try:
        import claude_agent_sdk  # noqa: F401
    except ImportError:
        print("  (claude-agent-sdk not installed: no SDK figures)")
    else:
        mix["sdk"] = lambda: _collected(lines, lambda: sdk_path(path), False)
        small_runs["sdk_small"] = lambda: _collected(small_lines, lambda: sdk_path(small_path), False)
    keys = ("lines_per_s", "wall_s", "cpu_us_per_line", "gc_ms", "gc_runs")
    mix_runs = interleave(mix, rounds, label=f"{label}mix ")
    small_done = interleave(small_runs, rounds, label=f"{label}small-delta ")
    out: dict[str, Any] = {}
    out.update(summarize(mix_runs, "bare", keys))
    out.update(summarize(small_done, "bare_small", keys))
    if "sdk" in mix:
        out.update({k: v for k, v in summarize(mix_runs, "sdk", keys).items() if "_vs_sdk" in k})
        out.update({k: v for k, v in summarize(small_done, "sdk_small", keys).items() if "_vs_sdk" in k})
    if tiny_path:
        out.update(_fixed_costs(rounds, tiny_path, label))
    pure = inprocess_costs(small, "stream-json")
    out.update({f"small_delta_{k}": v for k, v in pure.items()})
    pure_awp = inprocess_costs(_awp_lines(small), "awp-jsonl")
    out.update({f"small_delta_awp_jsonl_{k}": v for k, v in pure_awp.items()})
    out.update(event_build_costs())
    out.update(mix_lines_costs(blob))
    ceiling = statistics.median(f["wall_s"] for f in mix_runs["bare"]) + orjson_seconds(blob)
    out["full_parse_ceiling_s"] = ceiling
    return out


def main(rounds: int = 5, n_lines: int = 100_000) -> dict[str, Any]:
    """Run the comparison and print every run and a summary; returns the figures.

    The contenders interleave round by round (``rounds``, at least 5; env
    ``AGENTRT_BENCH_ROUNDS``) on the 100k-line mix (env ``AGENTRT_BENCH_LINES``)
    and on the small-delta profile, under CPython's default collector settings
    (a program embedding agentrt that does not tune them); ``agentrt_tuned_gc``
    and ``agentrt_small_tuned_gc`` are the same runs under
    :func:`agentrt.tune_gc`, as the ``agentrt`` command runs, in the same
    rounds.  Every agentrt run also reports the collector's runs and time
    (``gc_runs``, ``gc_ms``).  Every run prints the machine load.
    """
    import gc

    rounds = int(os.environ.get("AGENTRT_BENCH_ROUNDS", rounds))
    n_lines = int(os.environ.get("AGENTRT_BENCH_LINES", n_lines))
    corpus = corpus_module()
    blob = corpus.corpus_blob(n_lines)
    path = write_blob(blob)
    small = b"".join(line for kind, line in corpus.corpus_lines(200_000, big_lines=False) if kind == "text_delta")
    small_path = write_blob(small)
    awp_path = write_blob(_awp_lines(small))
    tiny_path = write_blob(b"".join(small.splitlines(keepends=True)[:10]))
    saved = gc.get_threshold()
    n_mix, n_small = blob.count(b"\n"), small.count(b"\n")
    print(f"host path: {n_mix} mix lines ({len(blob) / 1e6:.0f} MB), {n_small} small deltas [{load_text()}]")
    try:
        figures: dict[str, Any] = {"corpus_lines": blob.count(b"\n"), "corpus_mb": len(blob) / 1e6}
        figures.update(held_event_bytes(small[: 20_000 * 260], "stream-json"))
        figures.update(_measure(rounds, blob, path, small, small_path, awp_path, "", tiny_path))
    finally:
        gc.set_threshold(*saved)
        os.unlink(path)
        os.unlink(small_path)
        os.unlink(awp_path)
        os.unlink(tiny_path)
    print_summary(f"host path, in process (medians of {rounds} interleaved rounds [range]; spawn to reap)", figures)
    return figures


if __name__ == "__main__":
    main()
