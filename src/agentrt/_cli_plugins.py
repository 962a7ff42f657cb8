"""``agentrt plugins``: what is loaded and what each plugin provides."""

from __future__ import annotations

import json

import attrs
import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def plugins(as_json: bool) -> None:
    """List loaded plugins and the dialects, providers, tools and sinks they provide."""
    from ._cli_run import fail
    from ._plugins import get_plugins
    from .errors import AgentrtError

    try:
        infos = get_plugins().info()
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    if as_json:
        click.echo(json.dumps([attrs.asdict(i) for i in infos], indent=2))
        return
    if not infos:
        click.echo("no plugins loaded")
        return
    for info in infos:
        version = f" {info.version}" if info.version else ""
        dist = f" ({info.distribution}{version})" if info.distribution else ""
        click.echo(f"{info.name}{dist}")
        for label in ("dialects", "providers", "tools", "sinks"):
            names = getattr(info, label)
            if names:
                click.echo(f"  {label}: {', '.join(names)}")
        click.echo(f"  hooks: {', '.join(info.hooks)}")
