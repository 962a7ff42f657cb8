"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentrt import hookimpl


def _make_dialect() -> Any:
    from ._dialect import FastAgentDialect

    return FastAgentDialect()


@hookimpl
def agentrt_register_dialects(register: Callable[[str, Callable[[], Any]], None]) -> None:
    """Register the ``fastagent`` dialect (FastAgent ``--output jsonl`` lifecycle lines)."""
    register("fastagent", _make_dialect)


@hookimpl
def agentrt_register_commands(cli: Any) -> None:
    """Add ``agentrt bots`` (its modules load only when it runs)."""
    from ._cli_lazy import bots_group

    cli.add_command(bots_group())


@hookimpl(tryfirst=True)
def agentrt_bot_store(env: Mapping[str, str]) -> Any:
    """With ``AGENTRT_BOTS_REDIS_URL`` set, bots live in Redis (shared by every host); else no answer."""
    url = env.get("AGENTRT_BOTS_REDIS_URL")
    if not url:
        return None
    from ._redis_store import RedisBotStore

    return RedisBotStore(url)
