"""The TUI plugin's tests (``agentrt chat``, the ``tui`` sink): scratch home directories, nothing else shared."""

from __future__ import annotations

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
