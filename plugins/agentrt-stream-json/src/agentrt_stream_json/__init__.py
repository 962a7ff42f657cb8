"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrt import hookimpl


def _make() -> Any:
    from .codec import StreamJsonDialect

    return StreamJsonDialect()


@hookimpl
def agentrt_register_dialects(register: Callable[[str, Callable[[], Any]], None]) -> None:
    """Register ``stream-json`` (Claude-Code-style; adds the four compatibility flags)."""
    register("stream-json", _make)
