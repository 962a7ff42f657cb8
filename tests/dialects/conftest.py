"""Shared fixtures of the dialect tests: the real captures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

CAPTURES = (Path(__file__).resolve().parents[2].parent / "shared") / "fixtures/claude-code"


def _load(name: str) -> list[Any]:
    path = CAPTURES / name
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def capture() -> Callable[[str], list[Any]]:
    """``capture("basic_two_turns")``: the parsed stdout lines of a real capture."""

    def load(name: str) -> list[Any]:
        return _load(name if name.endswith(".jsonl") else f"{name}.stdout.jsonl")

    return load


@pytest.fixture
def all_capture_objects() -> list[Any]:
    """Every object of every capture, the SDK samples included."""
    return [obj for path in sorted(CAPTURES.glob("*.jsonl")) for obj in _load(path.name)]
