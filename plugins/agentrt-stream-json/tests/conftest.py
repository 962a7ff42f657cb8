"""The stream-json plugin's tests: scratch home directories, the real Claude Code captures, the message shapes.

The captures (``captures/claude-code``, recorded by the ``record.py`` beside them) and the project's
message-shape fixture (``fixtures/claude-code``) live here; the monorepo's own tests read them too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure

HERE = Path(__file__).resolve().parent
CAPTURES = HERE / "captures" / "claude-code"
SHAPES = HERE / "fixtures" / "claude-code" / "message-shapes.jsonl"


def _read(path: Path) -> list[Any]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def capture() -> Callable[[str], list[Any]]:
    """``capture("basic_two_turns")``: the parsed stdout lines of a real capture."""

    def load(name: str) -> list[Any]:
        return _read(CAPTURES / (name if name.endswith(".jsonl") else f"{name}.stdout.jsonl"))

    return load


@pytest.fixture
def message_shapes() -> list[Any]:
    """The parsed lines of ``fixtures/claude-code/message-shapes.jsonl`` (written by the project)."""
    return _read(SHAPES)


@pytest.fixture
def all_capture_objects() -> list[Any]:
    """Every object of every capture, and every message shape."""
    return [obj for path in sorted(CAPTURES.glob("*.jsonl")) for obj in _read(path)] + _read(SHAPES)
