"""The ``agentrt bots`` group, declared cheaply; its subcommands import on use."""

from __future__ import annotations

import importlib
from typing import Any

import click

_SUBCOMMANDS = ("add", "list", "start", "stop", "restart", "remove", "logs", "qr", "supervise")


class _LazyBots(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _SUBCOMMANDS:
            return None
        module = importlib.import_module("agentrt_fastagent._cli")
        command: click.Command = getattr(module, f"cmd_{cmd_name}")
        return command


def bots_group() -> Any:
    """The ``bots`` click group."""

    @click.group(name="bots", cls=_LazyBots)
    def bots() -> None:
        """Supervise FastAgent weixin bots: add, start, stop, watch, show the login QR code."""

    return bots
