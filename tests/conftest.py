"""Suite-wide: nothing a test runs may write into the real home directory.

`agentrt run`, `chat` and `web` record conversations by default and read a
config file; a test that runs them with the inherited environment would use
the developer's own database and config.  Every test process, and every child
that inherits its environment, gets scratch XDG directories instead (the public
pytest plugin ``agentrt.testing.pytest_plugin``, which each plugin's tests use too).
"""

from __future__ import annotations

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
