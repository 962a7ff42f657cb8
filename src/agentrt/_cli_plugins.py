"""``agentrt plugins``: what is loaded and what each plugin provides."""

from __future__ import annotations

import json

import attrs
import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def plugins(as_json: bool) -> None:
    """List loaded plugins and the dialects, providers, tools and sinks (with their roles) they provide.

    Exits 2 when two plugins register the same name (every command would then
    fail with duplicate_registration), naming both; warns when several sinks
    hold a role and none is chosen.
    """
    from ._cli_run import fail
    from ._plugins import get_plugins
    from .errors import AgentrtError

    try:
        registry = get_plugins()
        infos = registry.info()
        conflicts = registry.conflicts()
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    if as_json:
        click.echo(json.dumps([attrs.asdict(i) for i in infos], indent=2))
    elif not infos:
        click.echo("no plugins loaded")
    for info in () if as_json else infos:
        version = f" {info.version}" if info.version else ""
        dist = f" ({info.distribution}{version})" if info.distribution else ""
        click.echo(f"{info.name}{dist}")
        for label in ("dialects", "providers", "tools"):
            names = getattr(info, label)
            if names:
                click.echo(f"  {label}: {', '.join(names)}")
        if info.sinks:
            shown = (f"{name} (role {info.sink_roles.get(name, 'other')})" for name in info.sinks)
            click.echo(f"  sinks: {', '.join(shown)}")
        click.echo(f"  hooks: {', '.join(info.hooks)}")
    errors = [f"duplicate_registration: {conflict}" for conflict in conflicts]
    for collect in (registry.dialects, registry.providers, registry.tools, registry.sinks):
        try:
            collect()
        except AgentrtError as exc:  # a registration every command would refuse (a bad name or role)
            if exc.code != "duplicate_registration":  # those are all listed above
                errors.append(f"{exc.code}: {exc.detail}")
    for error in errors:
        click.echo(f"agentrt: error: {error}", err=True)
    if errors:
        raise SystemExit(2)
    for role in ("terminal", "recorder"):
        try:
            registry.sink_for(role)
        except AgentrtError as exc:  # a choice to make (or a choice that names nothing): said, not fatal here
            click.echo(f"agentrt: warning: {exc.code}: {exc.detail}", err=True)
