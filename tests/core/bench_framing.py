"""Benchmark: JsonlReader.feed per line on the bench corpus (``bench/corpus.py``), against baselines in the same run.

Run: ``.venv/bin/python tests/core/bench_framing.py [corpus.py path]``.  Prints
CPU nanoseconds per line (best of several rounds, process time) for:

* ``split``: a bare ``chunk.split(b"\\n")`` loop with a carried tail (framing floor),
* ``split+orjson``: the same plus ``orjson.loads`` of every line (parse floor),
* ``JsonlReader.feed``: the real thing;

and, for one small line per chunk (a paced agent), against bare ``orjson.loads``.

Chunks are 64 KiB (what a default Linux pipe delivers per read) and 256 KiB.
Not a test: speed is reported as ratios, never asserted.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from agentrt._framing import JsonlReader

CORPUS = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[2] / "bench" / "corpus.py")


def load_corpus() -> tuple[bytes, int, bytes, int]:
    spec = importlib.util.spec_from_file_location("corpus", CORPUS)
    assert spec and spec.loader
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    lines = corpus.corpus_lines(20_000)
    small = [b for kind, b in lines if kind == "text_delta"]
    return b"".join(b for _, b in lines), len(lines), b"".join(small), len(small)


def chunked(blob: bytes, size: int) -> list[bytes]:
    return [blob[i : i + size] for i in range(0, len(blob), size)]


def bare_split(chunks: list[bytes]) -> int:
    n = 0
    tail = b""
    for chunk in chunks:
        parts = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
        tail = parts.pop()
        n += len(parts)
    return n


def split_orjson(chunks: list[bytes]) -> int:
    loads = orjson.loads
    n = 0
    tail = b""
    for chunk in chunks:
        parts = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
        tail = parts.pop()
        n += len([loads(p) for p in parts if p])
    return n


def reader(chunks: list[bytes]) -> int:
    r = JsonlReader()
    n = 0
    for chunk in chunks:
        n += len(r.feed(chunk))
    return n + len(r.finish())


def bare_loads(chunks: list[bytes]) -> int:
    loads = orjson.loads
    for chunk in chunks:
        loads(chunk)
    return len(chunks)


def best(fn: Callable[[list[bytes]], int], chunks: list[bytes], rounds: int = 7) -> float:
    times = []
    for _ in range(rounds):
        t = time.process_time_ns()
        fn(chunks)
        times.append(time.process_time_ns() - t)
    return min(times)


def main() -> None:
    blob, n, small_blob, n_small = load_corpus()
    print(f"corpus: {n} lines, {len(blob) / 1e6:.1f} MB; small deltas only: {n_small} lines")
    for label, data, count in (("full corpus", blob, n), ("text_delta lines", small_blob, n_small)):
        for size in (65536, 262144):
            chunks = chunked(data, size)
            assert reader(chunks) == split_orjson(chunks) == count
            base = best(bare_split, chunks) / count
            parse = best(split_orjson, chunks) / count
            feed = best(reader, chunks) / count
            print(
                f"{label:17s} {size // 1024:4d} KiB chunks: split {base:7.1f} ns/line, "
                f"split+orjson {parse:7.1f}, JsonlReader.feed {feed:7.1f} "
                f"(framing overhead over split+orjson: {feed - parse:+.1f} ns/line, "
                f"ratio {feed / parse:.3f})"
            )

    # A paced agent: one small line per read (the chunk is the line).
    one = [line + b"\n" for line in small_blob.split(b"\n")[:-1]][:10000]
    parse = best(bare_loads, one) / len(one)
    split = best(split_orjson, one) / len(one)
    feed = best(reader, one) / len(one)
    print(
        f"one text_delta line per chunk: orjson.loads alone {parse:6.0f} ns/line, split+orjson {split:6.0f}, "
        f"JsonlReader.feed {feed:6.0f} (framing overhead over orjson: {feed - parse:+.0f} ns/line)"
    )


if __name__ == "__main__":
    main()
