"""Benchmark: the host codecs' decode cost per line, against orjson.loads alone.

Run: ``.venv/bin/python tests/dialects/bench_decode.py``.  Uses the bench
corpus (``bench/corpus.py``: (20,000 Claude-Code-style stream-json lines, 1 MB lines included).  For
each pass the lines are parsed with orjson (the baseline) and, separately,
parsed and decoded by a fresh host codec; the decode cost is the difference.
CPU time, best of several alternated passes, same process.  Not a test: nothing is asserted.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from agentrt_awp_jsonl.codec import AwpJsonlDialect
from agentrt_stream_json.codec import StreamJsonDialect

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "corpus.py"
PASSES = 7


def _corpus() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("agentrt_bench_corpus", CORPUS)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _best_pair(first: Callable[[], None], second: Callable[[], None]) -> tuple[float, float]:
    # CPU time (the machine may be shared), passes alternated so that drift
    # hits both sides alike; the best pass of each.
    best = [float("inf"), float("inf")]
    for _ in range(PASSES):
        for slot, run in enumerate((first, second)):
            gc.collect()
            start = time.process_time()
            run()
            best[slot] = min(best[slot], time.process_time() - start)
    return best[0], best[1]


def measure(lines: list[bytes], make_codec: Callable[[], Any]) -> dict[str, float]:
    loads = orjson.loads

    def baseline() -> None:
        for line in lines:
            loads(line)

    def decode() -> None:
        codec = make_codec()
        dec = codec.decode
        for line in lines:
            dec(loads(line))

    base, both = _best_pair(baseline, decode)
    n = len(lines)
    return {
        "lines": n,
        "orjson_ns_per_line": base / n * 1e9,
        "loads_plus_decode_ns_per_line": both / n * 1e9,
        "decode_ns_per_line": (both - base) / n * 1e9,
        "ratio_vs_orjson": both / base,
    }


def main() -> dict[str, Any]:
    corpus = _corpus()
    pairs = corpus.corpus_lines()
    everything = [line for _, line in pairs]
    small = [line for kind, line in pairs if kind != "big_1mb"]
    deltas = [line for kind, line in pairs if kind == "text_delta"]
    results: dict[str, Any] = {}
    for label, factory in (
        ("stream-json", StreamJsonDialect().host_codec),
        ("awp-jsonl", AwpJsonlDialect().host_codec),
    ):
        for subset, lines in (("all", everything), ("no_1mb", small), ("text_delta", deltas)):
            results[f"{label}/{subset}"] = measure(lines, factory)
    print(f"{'codec/subset':28} {'lines':>6} {'orjson ns':>10} {'+decode ns':>11} {'decode ns':>10} {'ratio':>6}")
    for key, r in results.items():
        print(
            f"{key:28} {r['lines']:6d} {r['orjson_ns_per_line']:10.0f} {r['loads_plus_decode_ns_per_line']:11.0f}"
            f" {r['decode_ns_per_line']:10.0f} {r['ratio_vs_orjson']:6.2f}"
        )
    return results


if __name__ == "__main__":
    out = main()
    if "--json" in sys.argv:
        print(json.dumps(out, indent=2))
