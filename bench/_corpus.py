"""Load the shared benchmark corpus (../shared/bench/corpus.py) and write it to a file."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).resolve().parent
_CANDIDATES = (
    _HERE.parent.parent / "shared" / "bench" / "corpus.py",
    _HERE / "corpus_copy_missing.py",
)


def corpus_module() -> ModuleType:
    """The shared corpus generator (found beside the checkout, as CI lays it out)."""
    env = os.environ.get("AGENTRT_BENCH_CORPUS")
    paths = [Path(env)] if env else list(_CANDIDATES)
    for path in paths:
        if path.is_file():
            spec = importlib.util.spec_from_file_location("agentrt_bench_corpus", path)
            assert spec and spec.loader
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    raise SystemExit("benchmark corpus not found: set AGENTRT_BENCH_CORPUS to shared/bench/corpus.py")


def write_blob(blob: bytes) -> str:
    """Write ``blob`` to a temporary file and return its path."""
    fd, path = tempfile.mkstemp(prefix="agentrt-bench-", suffix=".jsonl")
    with os.fdopen(fd, "wb") as f:
        f.write(blob)
    return path
