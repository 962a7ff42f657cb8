"""Fixtures of the reference-agent tests; the helpers live in reference_agent_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The test modules import their helpers by name (pytest runs with --import-mode=importlib,
# which does not put test directories on sys.path).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """A private scratch directory (0700, as a real HOME is)."""
    tmp_path.chmod(0o700)
    return tmp_path
