"""The example plugin's hook implementations: thin, the codec is imported by the factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrt import hookimpl


def _make_dialect() -> Any:
    from ._codec import EchoJsonlDialect  # imported only when the dialect is used

    return EchoJsonlDialect()


@hookimpl
def agentrt_register_dialects(register: Callable[[str, Callable[[], Any]], None]) -> None:
    """Register the ``echo-jsonl`` dialect."""
    register("echo-jsonl", _make_dialect)
