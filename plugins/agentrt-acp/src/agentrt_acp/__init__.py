"""Hook implementations of this plugin (kept thin: heavy imports happen in the factory)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrt import hookimpl


def _make() -> Any:
    from ._options import AcpOptions
    from .codec import AcpDialect

    return AcpDialect(AcpOptions.from_env())


@hookimpl
def agentrt_register_dialects(register: Callable[[str, Callable[[], Any]], None]) -> None:
    """Register ``acp``: the Agent Client Protocol, session opened in band (no argv flags)."""
    register("acp", _make)
