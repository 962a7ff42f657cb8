"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrt import hookimpl


def _factory(name: str) -> Callable[[], Any]:
    def make() -> Any:
        from .codec import AwpJsonlDialect

        return AwpJsonlDialect(name)

    return make


@hookimpl
def agentrt_register_dialects(register: Callable[[str, Callable[[], Any]], None]) -> None:
    """Register ``awp-jsonl`` and its alias ``passthrough`` (same codecs, no compat flags)."""
    register("awp-jsonl", _factory("awp-jsonl"))
    register("passthrough", _factory("passthrough"))
