"""The awp-jsonl plugin's tests: scratch home directories.

The agents they drive are public fixtures (:mod:`agentrt.testing`); nothing outside this distribution is read.
"""

from __future__ import annotations

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
