"""Host-path throughput: agentrt vs the Claude Agent SDK vs a bare trio loop, in one run.

Every contender reads the same corpus from a real child process (bench/_emit.py,
which waits for one input line and then writes the file in 1 MiB writes):

* ``bare``: trio.lowlevel.open_process, receive_some, split on newlines (the ceiling);
* ``agentrt``: open_conversation over the dialect, framing, decode, turn rules,
  fan-out to a no-op sink (the whole host path);
* ``sdk``: claude-agent-sdk's SubprocessCLITransport plus its parse_message, under
  asyncio (its native loop).

Figures are ratios measured in the same process run, never absolute thresholds.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import trio

from ._corpus import corpus_module, write_blob

EMIT = str(Path(__file__).resolve().parent / "_emit.py")
PYTHON = os.path.realpath(sys.executable)


def _child_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


async def bare_loop(path: str) -> tuple[int, float]:
    """Lines counted by a bare trio read-and-split loop, and the seconds it took."""
    proc = await trio.lowlevel.open_process([PYTHON, EMIT, path], stdin=-1, stdout=-1, env=_child_env())
    assert proc.stdin is not None and proc.stdout is not None
    start = time.perf_counter()
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


class _NoopSink:
    name = "noop"
    policy = "block"
    buffer_size = 1024

    def __init__(self) -> None:
        self.events = 0
        self.done = trio.Event()

    async def handle(self, batch: Any) -> None:
        from agentrt.events import ProcessExited

        self.events += len(batch.events)
        if type(batch.events[-1]) is ProcessExited:
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
        elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    return noop.events, elapsed, cpu


def sdk_path(path: str) -> tuple[int, float]:
    """Messages parsed by the Claude Agent SDK's transport + parse_message, and seconds."""
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

    async def go() -> tuple[int, float]:
        options = ClaudeAgentOptions(cli_path=str(script), max_buffer_size=8 * 1024 * 1024)
        transport = SubprocessCLITransport(prompt="", options=options)
        await transport.connect()
        start = time.perf_counter()
        await transport.write('{"type":"user"}\n')
        n = 0
        async for data in transport.read_messages():
            try:
                parse_message(data)
            except Exception:
                pass  # unknown shapes: the SDK raises, counted like parsed
            n += 1
        elapsed = time.perf_counter() - start
        await transport.close()
        return n, elapsed

    try:
        return asyncio.run(go())
    finally:
        script.unlink(missing_ok=True)


def inprocess_costs(blob: bytes, protocol: str, repeat: int = 5) -> dict[str, float]:
    """CPU µs per line, in this process, of the host path's pure part and of orjson alone.

    The pure part is framing, decoding and the turn rules, fed 64 KiB chunks (the
    read size), exactly as the pump does; orjson.loads over the same lines is the
    floor no JSON host can go under.  Both are measured interleaved, best of
    ``repeat``, so the ratio holds on a loaded machine even when the absolute
    figures drift.
    """
    import orjson

    from agentrt import Conversation, LaunchSpec, Plugins
    from agentrt.lowlevel import JsonlReader
    from agentrt.permissions import deny_all

    plugins = Plugins(autoload=True)
    dialect = plugins.dialect(protocol)
    lines = [line for line in blob.split(b"\n") if line]
    chunks = [blob[i : i + 65536] for i in range(0, len(blob), 65536)]

    def host() -> float:
        conv = Conversation(
            nursery=None,  # type: ignore[arg-type]
            launch=LaunchSpec(executable="/bin/true", protocol=protocol),
            dialect=dialect,
            permission_policy=deny_all,
            cwd=None,
            parent_env={},
            conversation_id="bench",
            resume=None,
        )
        conv._inputs_this_process = 1  # a turn was sent: no output_before_input path
        codec = dialect.host_codec()
        reader = JsonlReader(codec.line_loader)
        t0 = time.process_time()
        for chunk in chunks:
            objs = reader.feed(chunk)
            if objs:  # as the pump does: one batch call when every line parsed
                conv._apply(codec.decode_batch(objs))
        return time.process_time() - t0

    def floor() -> float:
        loads = orjson.loads
        t0 = time.process_time()
        for line in lines:
            loads(line)
        return time.process_time() - t0

    best_host = best_floor = float("inf")
    for _ in range(repeat):
        best_host = min(best_host, host())
        best_floor = min(best_floor, floor())
    n = len(lines)
    return {
        "inprocess_us_per_line": best_host / n * 1e6,
        "orjson_us_per_line": best_floor / n * 1e6,
        "inprocess_vs_orjson": best_host / best_floor,
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
    """Bytes of memory per text-delta event still held after decoding, typed line loader vs plain parse.

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
        reader = JsonlReader(codec.line_loader if typed else None)
        events: list[Any] = []
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for chunk in chunks:
            events.extend(codec.decode_batch(reader.feed(chunk)))
        used = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        return used / len(events), len(events)

    typed, n_typed = held(True)
    plain, n_plain = held(False)
    assert n_typed == n_plain
    return {
        "held_bytes_per_event_typed": typed,
        "held_bytes_per_event_plain": plain,
        "held_typed_vs_plain": typed / plain,
    }


def _awp_lines(small: bytes) -> bytes:
    # The same deltas as an awp-jsonl agent writes them: the bare raw API event.
    import orjson

    return b"".join(orjson.dumps(orjson.loads(line)["event"]) + b"\n" for line in small.splitlines())


def _best(runs: list[tuple[int, float]]) -> tuple[int, float]:
    return min(runs, key=lambda r: r[1])


def _measure(repeat: int, blob: bytes, path: str, small: bytes, small_path: str, awp_path: str) -> dict[str, float]:
    lines = blob.count(b"\n")
    small_lines = small.count(b"\n")
    bare = _best([trio.run(bare_loop, path) for _ in range(repeat)])
    ours = min((trio.run(agentrt_path, path, "stream-json") for _ in range(repeat)), key=lambda r: r[1])
    try:
        sdk: tuple[int, float] | None = _best([sdk_path(path) for _ in range(repeat)])
    except ImportError:
        sdk = None
    cpu_runs = [trio.run(agentrt_path, small_path, "stream-json") for _ in range(repeat)]
    bare_small = _best([trio.run(bare_loop, small_path) for _ in range(repeat)])
    cpu_per_line_us = min(r[2] for r in cpu_runs) / small_lines * 1e6
    awp_runs = [trio.run(agentrt_path, awp_path, "awp-jsonl") for _ in range(repeat)]
    pure = inprocess_costs(small, "stream-json")
    figures: dict[str, float] = {
        "bare_lines_per_s": lines / bare[1],
        "agentrt_lines_per_s": lines / ours[1],
        "agentrt_vs_bare": bare[1] / ours[1],
        "agentrt_cpu_us_per_small_delta_line": cpu_per_line_us,
        "agentrt_cpu_us_per_small_delta_line_awp_jsonl": min(r[2] for r in awp_runs) / small_lines * 1e6,
        "bare_small_lines_per_s": small_lines / bare_small[1],
        "small_delta_inprocess_us_per_line": pure["inprocess_us_per_line"],
        "small_delta_orjson_us_per_line": pure["orjson_us_per_line"],
        "small_delta_inprocess_vs_orjson": pure["inprocess_vs_orjson"],
    }
    ceiling = bare[1] + orjson_seconds(blob)
    figures["full_parse_ceiling_s"] = ceiling
    figures["agentrt_vs_full_parse_ceiling"] = ceiling / ours[1]
    if sdk is not None:
        figures["sdk_lines_per_s"] = lines / sdk[1]
        figures["sdk_vs_bare"] = bare[1] / sdk[1]
        figures["agentrt_vs_sdk"] = sdk[1] / ours[1]
        # What "parse every line with orjson, nothing else" would reach against the SDK.
        figures["full_parse_ceiling_vs_sdk"] = sdk[1] / ceiling
    return figures


def main(repeat: int = 3, n_lines: int = 20_000) -> dict[str, float]:
    """Run the comparison twice and print a table; returns the figures.

    First with CPython's default collector settings (a program embedding
    agentrt that does not tune them), then after :func:`agentrt.tune_gc`, as
    the ``agentrt`` command runs (those figures carry a ``_tuned_gc`` suffix).
    Every contender runs under the same settings in each half.
    """
    import gc

    from agentrt import tune_gc

    corpus = corpus_module()
    blob = corpus.corpus_blob(n_lines)
    path = write_blob(blob)
    small = b"".join(line for kind, line in corpus.corpus_lines(200_000, big_lines=False) if kind == "text_delta")
    small_path = write_blob(small)
    awp_path = write_blob(_awp_lines(small))
    saved = gc.get_threshold()
    try:
        figures: dict[str, float] = {"corpus_lines": blob.count(b"\n"), "corpus_mb": len(blob) / 1e6}
        figures.update(held_event_bytes(small[: 20_000 * 260], "stream-json"))
        figures.update(_measure(repeat, blob, path, small, small_path, awp_path))
        tune_gc()
        tuned = _measure(repeat, blob, path, small, small_path, awp_path)
        figures.update({f"{key}_tuned_gc": value for key, value in tuned.items()})
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
        os.unlink(path)
        os.unlink(small_path)
        os.unlink(awp_path)
    print("host path (stream-json corpus, best of", repeat, "runs)")
    for key, value in figures.items():
        print(f"  {key:48s} {value:14.3f}")
    return figures


if __name__ == "__main__":
    main()
