"""The soak runs only when asked for (``nox -s soak``, i.e. ``pytest -m soak``): it takes hours at full size."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "soak" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="the soak runs only with -m soak (nox -s soak)")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(skip)
