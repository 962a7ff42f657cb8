"""``python -m agentrt.testing.fixture_agent``: run the fixture agent CLI.

See :mod:`agentrt.testing._fixture_agent` for the modes.
"""

from __future__ import annotations

from ._fixture_agent import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
