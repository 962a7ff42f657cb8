"""Benchmark: the stdout pump (AgentProcess.receive_some + JsonlReader.feed) per read size.

Run: ``.venv/bin/python tests/core/bench_process.py``.  A child writes the bench
corpus (``bench/corpus.py``, 41 MB, 20,000 lines) to stdout as fast as it can; the host reads and
frames it.  Prints the host's CPU time per line and the wall time, for each
read size (the default pipe holds 64 KiB).  A second part measures one small
line per read, the common case of a paced agent, as ns per write+read pair.
Not a test: nothing is asserted about speed.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import time

import trio

from agentrt._framing import JsonlReader
from agentrt._process import ProcessSpec, open_process

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import corpus

WRITER = "import sys; data = open(sys.argv[1], 'rb').read(); sys.stdout.buffer.write(data)"


async def pump(path: str, read_size: int) -> tuple[int, float, float]:
    spec = ProcessSpec(argv=(sys.executable, "-S", "-c", WRITER, path), env={}, stdin=False)
    reader = JsonlReader()
    n = 0
    wall = time.perf_counter()
    cpu = time.process_time()
    async with open_process(spec) as proc:
        while chunk := await proc.receive_some(read_size):
            n += len(reader.feed(chunk))
    n += len(reader.finish())
    return n, time.process_time() - cpu, time.perf_counter() - wall


async def main() -> None:
    blob = corpus.corpus_blob(20_000)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.jsonl")
        pathlib.Path(path).write_bytes(blob)
        for read_size in (4096, 16384, 65536, 131072, 262144):
            results = [await pump(path, read_size) for _ in range(5)]
            n = results[0][0]
            cpu = min(r[1] for r in results)
            wall = min(r[2] for r in results)
            print(
                f"read {read_size // 1024:5d} KiB: host CPU {cpu / n * 1e9:7.0f} ns/line, "
                f"wall {wall * 1e3:6.0f} ms for {n} lines ({len(blob) / wall / 1e6:.0f} MB/s)"
            )


def small_reads() -> None:
    r, w = os.pipe()
    line = b"x" * 250 + b"\n"
    for size in (4096, 65536, 131072, 262144):
        t = time.process_time_ns()
        for _ in range(20000):
            os.write(w, line)
            os.read(r, size)
        print(
            f"one 251-byte line per read, read size {size // 1024:4d} KiB: "
            f"{(time.process_time_ns() - t) / 20000:6.0f} ns per write+read"
        )
    os.close(r)
    os.close(w)


if __name__ == "__main__":
    small_reads()
    trio.run(main)
