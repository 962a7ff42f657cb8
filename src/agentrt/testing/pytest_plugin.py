"""A pytest plugin for suites that run agentrt: nothing a test runs writes into the real home directory.

``agentrt run``, ``chat`` and ``web`` record conversations by default and read a
config file; a test that ran them with the inherited environment would use the
developer's own database and config.  With this plugin every test process, and
every child that inherits its environment, gets scratch XDG directories
(removed when the run ends), and ``AGENTRT_CONFIG`` / ``AGENTRT_DATABASE_URL``
are unset.

Use it from a ``conftest.py`` by importing its hooks (safe in any number of
conftest files; the scratch directories are made once per process)::

    from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
    from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure

or name it in the root conftest's ``pytest_plugins``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

__all__ = ["XDG_NAMES", "pytest_configure", "pytest_unconfigure", "scratch_home"]

#: The variables pointed at scratch directories.
XDG_NAMES = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")

_scratch: str | None = None


def scratch_home() -> str:
    """Point the XDG variables at one scratch directory of this process (made on first call) and return it.

    Idempotent: later calls return the same directory and set the same values.
    """
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="agentrt-tests-home-")
    for name in XDG_NAMES:
        os.environ[name] = os.path.join(_scratch, name.lower())
    os.environ.pop("AGENTRT_CONFIG", None)
    os.environ.pop("AGENTRT_DATABASE_URL", None)
    return _scratch


def pytest_configure(config: Any) -> None:
    """Before any test: scratch XDG directories, no inherited agentrt config or database."""
    scratch_home()


def pytest_unconfigure(config: Any) -> None:
    """After the run: the scratch directories go."""
    global _scratch
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)
        _scratch = None
