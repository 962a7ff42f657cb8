"""The acp plugin's tests: scratch home directories.

Real peers' traffic lives in ``captures/acp`` (recorded by ``captures/acp/record.py``), the fixture agent
and line client in ``fixtures/``; the real peers themselves and their fake model APIs come through
:mod:`agentrt.testing.real_peers` and :mod:`agentrt.testing.fake_apis`.
"""

from __future__ import annotations

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
