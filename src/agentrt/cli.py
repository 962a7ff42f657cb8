"""The ``agentrt`` command: a click group whose subcommands load lazily.

Core subcommands live in private ``_cli_*`` modules and are imported only
when invoked (or when ``--help`` lists them), so start-up stays cheap; plugins
add their own through ``agentrt_register_commands``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

import click

__all__ = ["main", "cli"]

#: name -> "module:attribute" of the core subcommands.
_CORE: dict[str, str] = {
    "run": "agentrt._cli_run:run",
    "plugins": "agentrt._cli_plugins:plugins",
    "plugin": "agentrt._cli_plugin_new:plugin",
    "check": "agentrt._cli_check:check",
    "bridge": "agentrt._cli_bridge:bridge",
    "agent": "agentrt._cli_agent:agent",
    "agents": "agentrt._cli_agents:agents",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._available()))

    def _available(self) -> dict[str, str]:
        out = {}
        for name, target in _CORE.items():
            module = target.split(":", 1)[0]
            if importlib.util.find_spec(module) is not None:
                out[name] = target
        return out

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        target = self._available().get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":", 1)
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="agentrt", prog_name="agentrt")
def cli() -> None:
    """agentrt: drive agent CLIs, build them from plugins, embed them in trio programs."""


_commands_loaded = False


def _load_plugin_commands() -> None:
    global _commands_loaded
    if _commands_loaded:
        return
    _commands_loaded = True
    from ._plugins import get_plugins
    from .errors import AgentrtError

    try:
        get_plugins().add_commands(cli)
    except AgentrtError as exc:
        click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
        sys.exit(2)


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``agentrt`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in _CORE:
        # Plugins' subcommands are needed to find the command or list them; a core
        # command loads plugins itself and reports a broken one in its own way
        # (`agentrt agent` must answer with its protocol's startup line).
        _load_plugin_commands()
    if os.environ.get("AGENTRT_GC", "").strip().lower() != "default":
        # This process streams agent output for its whole life: see tune_gc.
        from ._os.gc_tuning import tune_gc

        tune_gc()
    if os.environ.get("AGENTRT_MALLOC", "").strip().lower() != "default":
        # Nor give back and page in again a batch's worth of memory per batch: see tune_malloc.
        from ._os.malloc_tuning import tune_malloc

        tune_malloc()
    return cli.main(args=argv, prog_name="agentrt")
