"""Suite-wide: nothing a test runs may write into the real home directory.

`agentrt run`, `chat` and `web` record conversations by default and read a
config file; a test that runs them with the inherited environment would use
the developer's own database and config.  Every test process, and every child
that inherits its environment, gets scratch XDG directories instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_SCRATCH = tempfile.mkdtemp(prefix="agentrt-tests-home-")


def pytest_configure(config: pytest.Config) -> None:
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        os.environ[name] = os.path.join(_SCRATCH, name.lower())
    os.environ.pop("AGENTRT_CONFIG", None)
    os.environ.pop("AGENTRT_DATABASE_URL", None)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SCRATCH, ignore_errors=True)
