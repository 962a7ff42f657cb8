"""The SQLite recorder's tests (sink, store, ``agentrt logs`` / ``threads``): scratch home directories."""

from __future__ import annotations

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
