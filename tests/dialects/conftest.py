"""Shared fixtures of the dialect tests: the real captures, and the project's message-shape fixture."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from ..plugin_data import CLAUDE_CODE_CAPTURES, CLAUDE_CODE_SHAPES

CAPTURES = CLAUDE_CODE_CAPTURES
SHAPES = CLAUDE_CODE_SHAPES


def _load(name: str) -> list[Any]:
    return _read(CAPTURES / name)


def _read(path: Path) -> list[Any]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def capture() -> Callable[[str], list[Any]]:
    """``capture("basic_two_turns")``: the parsed stdout lines of a real capture."""

    def load(name: str) -> list[Any]:
        return _load(name if name.endswith(".jsonl") else f"{name}.stdout.jsonl")

    return load


@pytest.fixture
def message_shapes() -> list[Any]:
    """The parsed lines of the Claude Code message shapes (written by the project, not recorded)."""
    return _read(SHAPES)


@pytest.fixture
def all_capture_objects() -> list[Any]:
    """Every object of every capture, and every message shape."""
    return [obj for path in sorted(CAPTURES.glob("*.jsonl")) for obj in _load(path.name)] + _read(SHAPES)
