"""Run the benchmarks: ``python -m bench [name ...]``; prints each table and a JSON summary."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

ALL = ("host_path", "whole_process", "many", "acp", "provider_sse", "agent_latency", "sinks", "bots", "tasks", "web")


def main(argv: list[str]) -> int:
    names = argv or [n for n in ALL if (Path(__file__).parent / f"{n}.py").exists()]
    results: dict[str, object] = {}
    for name in names:
        print(f"== {name}")
        module = importlib.import_module(f"bench.{name}")
        results[name] = module.main()
    out = Path("bench-results")
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
