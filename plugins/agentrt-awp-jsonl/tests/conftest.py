"""The awp-jsonl plugin's tests: scratch home directories.

The fake peers and captures they drive are the repository's (``tests/dialects/fixtures``).
"""

from __future__ import annotations

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
