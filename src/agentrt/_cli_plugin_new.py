"""``agentrt plugin new KIND NAME [DIR]``: write a plugin package that works as it stands."""

from __future__ import annotations

import os
from pathlib import Path

import click


@click.group()
def plugin() -> None:
    """Write plugin packages (agentrt plugins lists the installed ones)."""


@plugin.command("new")
@click.argument("kind", metavar="KIND")
@click.argument("name", metavar="NAME")
@click.argument("directory", metavar="[DIR]", required=False, type=click.Path(path_type=Path))
def new(kind: str, name: str, directory: Path | None) -> None:
    """Write a KIND plugin (dialect, provider, tool or sink) called NAME into DIR (default ./agentrt-NAME).

    The package installs with pip, registers one KIND named NAME (a tool: NAME
    with _ for -), passes its own test (its kind's conformance suite, through
    the installed entry point) and shows in `agentrt plugins`.  Errors:
    unknown_plugin_kind, invalid_plugin_name, plugin_name_taken (an installed
    plugin has the name), plugin_dir_not_empty, plugin_write_failed.
    """
    from ._cli_run import fail
    from ._plugin_new import write_plugin
    from .errors import AgentrtError

    try:
        written = write_plugin(kind, name, directory, taken=_taken(kind))
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    root = Path(os.path.commonpath(written))
    click.echo(f"wrote {len(written)} files to {root}")
    for path in sorted(written):
        click.echo(f"  {path.relative_to(root)}")
    click.echo(f"next: pip install -e {root} && pytest {root / 'tests'} && agentrt plugins")


def _taken(kind: str) -> set[str]:
    """The plugin names and the names of ``kind`` registered by the installed plugins (none if they fail to load)."""
    from ._plugins import get_plugins
    from .errors import AgentrtError

    try:
        registry = get_plugins()
        names = {info.name for info in registry.info()}
        if kind == "dialect":
            names |= set(registry.dialects())
        elif kind == "provider":
            names |= set(registry.providers())
        elif kind == "tool":
            names |= set(registry.tools())
        elif kind == "sink":
            names |= set(registry.sinks())
        return names
    except AgentrtError:
        return set()  # a broken or conflicting plugin: `agentrt plugins` says so; writing goes on
