"""In process: ``run --json``'s line encoder on the 100k-line mix, tool payloads written through or not.

``python tests/core/bench_event_line.py`` from the checkout (it uses private
names, so it lives beside the tests rather than in bench/, whose round and
corpus helpers it borrows).

The mix is decoded by stream-json's typed path (tool inputs and results kept
as unread fragments) once per contender and round; then the parent CPU of
encoding every event with ``agentrt._eventjson.event_line`` is measured:

* ``parse_encode``: every fragment parsed and encoded (the encoder before the
  pass-through; the baseline);
* ``written_through``: fragments written as their own bytes when
  ``agentrt._json.fragment_passthrough.fragment_bytes`` passes them;
* ``screen_only`` and ``loads_dumps``: just the check, and just
  ``orjson.dumps(orjson.loads(...))``, over every fragment of the mix.

In-process figures (not end to end): medians of interleaved rounds with ranges,
ratios to ``parse_encode`` in the same rounds.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for bench's helpers
from bench._corpus import corpus_module
from bench._rounds import Figures, interleave, load_text, print_summary, summarize


def _decode(blob: bytes) -> list[Any]:
    from agentrt import Plugins
    from agentrt._line_parse import decode_objects
    from agentrt.lowlevel import JsonlReader

    codec = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "stream-json"}).dialect("stream-json").host_codec()
    reader = JsonlReader()
    events: list[Any] = []

    def general(line: bytes) -> Any:
        return decode_objects(codec, reader.parse(line))

    for start in range(0, len(blob), 1 << 18):  # the pump's bulk reads, through its decode_lines
        events.extend(codec.decode_lines(reader.feed_lines(blob[start : start + (1 << 18)]), general))
    return events


def _fragments(events: list[Any]) -> list[Any]:
    from agentrt._json.lazy_fields import JsonFragment, stored_getter
    from agentrt.events import ToolResult, ToolUse

    getters = {ToolUse: stored_getter(ToolUse, "input"), ToolResult: stored_getter(ToolResult, "content")}
    out = []
    for ev in events:
        get = getters.get(type(ev))
        if get is not None and type(value := get(ev, type(ev))) is JsonFragment and value.data:
            out.append(value)
    return out


def main(rounds: int = 5, n_lines: int = 100_000) -> dict[str, Any]:
    """Interleave the contenders for ``rounds`` rounds; print every run and the summary."""
    from agentrt import _eventjson
    from agentrt._json.fragment_passthrough import fragment_bytes

    rounds = int(os.environ.get("AGENTRT_BENCH_ROUNDS", rounds))
    n_lines = int(os.environ.get("AGENTRT_BENCH_LINES", n_lines))
    blob = b"".join(line for _, line in corpus_module().corpus_lines(n_lines))
    payloads = _fragments(_decode(blob))
    payload_mb = sum(len(f.data) for f in payloads) / 1e6

    def encode(through: bool) -> Figures:
        events = _decode(blob)
        _eventjson.fragment_bytes = fragment_bytes if through else (lambda data, mapping=False: None)
        gc.collect()
        try:
            start = time.process_time()
            size = sum(len(_eventjson.event_line(ev)) for ev in events)
            cpu = time.process_time() - start
        finally:
            _eventjson.fragment_bytes = fragment_bytes
        return {"cpu_s": cpu, "out_mb": size / 1e6}

    def screen() -> Figures:
        start = time.process_time()
        for f in payloads:
            fragment_bytes(f.data, mapping=f.mapping)
        return {"cpu_s": time.process_time() - start}

    def loads_dumps() -> Figures:
        loads, dumps = orjson.loads, orjson.dumps
        start = time.process_time()
        for f in payloads:
            dumps(loads(memoryview(f.data)))
        return {"cpu_s": time.process_time() - start}

    contenders = {
        "parse_encode": lambda: encode(False),
        "written_through": lambda: encode(True),
        "screen_only": screen,
        "loads_dumps": loads_dumps,
    }
    print(f"json payloads: {n_lines} lines, {len(payloads)} payloads of {payload_mb:.0f} MB, {rounds} rounds "
          f"[{load_text()}]")
    runs = interleave(contenders, rounds)
    summary = summarize(runs, "parse_encode", ("cpu_s", "out_mb"))
    summary["payloads"] = len(payloads)
    summary["payload_mb"] = payload_mb
    print_summary(f"run --json's encoder, in process (medians of {rounds} interleaved rounds [range]; "
                  "ratios to parse_encode)", summary)
    return summary


if __name__ == "__main__":
    main()
