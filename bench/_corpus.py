"""The benchmark corpus (``bench/corpus.py``, deterministic stream-json) and a helper to write it to a file."""

from __future__ import annotations

import os
import tempfile
from types import ModuleType

from . import corpus


def corpus_module() -> ModuleType:
    """The corpus generator: ``corpus_lines(n_lines, seed, big_lines)``, ``corpus_blob``, ``describe``."""
    return corpus


def write_blob(blob: bytes) -> str:
    """Write ``blob`` to a temporary file and return its path."""
    fd, path = tempfile.mkstemp(prefix="agentrt-bench-", suffix=".jsonl")
    with os.fdopen(fd, "wb") as f:
        f.write(blob)
    return path
