"""The jsonl-file sink passes agentrt's sink conformance suite, loaded through its entry point."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import trio

from agentrt import Plugins
from agentrt.testing import check_sink


def test_conformance(tmp_path: Path) -> None:
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "example-sink"})
    factory = plugins.sinks()["jsonl-file"]
    numbers = itertools.count()

    def make() -> Any:
        return factory({"env": {"EXAMPLE_JSONL_FILE": str(tmp_path / f"events-{next(numbers)}.jsonl")}})

    async def observe(sink: Any) -> Sequence[tuple[str, int]]:
        lines = (await trio.Path(sink.path).read_bytes()).splitlines()
        return [(obj["source"], obj["seq"]) for obj in map(orjson.loads, lines)]

    trio.run(functools.partial(check_sink, make, observe=observe))
