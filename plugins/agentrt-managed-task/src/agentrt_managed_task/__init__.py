"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentrt import hookimpl


def _tool_factory(env: Mapping[str, str]) -> Any:
    from ._config import ClientConfig

    config = ClientConfig.from_env(env)
    if config is None:
        return None
    from ._tool import ManagedTaskTool

    return ManagedTaskTool(config)


@hookimpl
def agentrt_register_tools(register: Callable[[str, Any], None]) -> None:
    """Offer ``awp_run_managed_task`` when the opt-in, URL and key are all configured."""
    register("awp_run_managed_task", _tool_factory)


@hookimpl
def agentrt_register_commands(cli: Any) -> None:
    """Add ``agentrt control-plane`` and ``agentrt worker``."""
    from ._cli import control_plane, worker

    cli.add_command(control_plane)
    cli.add_command(worker)
