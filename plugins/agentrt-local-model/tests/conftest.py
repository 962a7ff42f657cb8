"""The local-model plugin's tests (``agentrt demo``): scratch home directories and a private scratch directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """A private scratch directory (0700, as a real HOME is)."""
    tmp_path.chmod(0o700)
    return tmp_path
