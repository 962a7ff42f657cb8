"""``agentrt check``: a conformance report for the CLI the launch contract names."""

from __future__ import annotations

import json
import os
import sys

import click


@click.command()
@click.option("-a", "--agent", help="Named agent from the config file (default: default_agent).")
@click.option("--protocol", help="Dialect to speak (overrides AWP_AGENT_CLI_PROTOCOL).")
@click.option("-m", "--model", help="Model id (overrides AWP_AGENT_DEFAULT_MODEL).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--turn-timeout", type=float, default=120.0, show_default=True, help="Seconds allowed per turn.")
def check(agent: str | None, protocol: str | None, model: str | None, as_json: bool, turn_timeout: float) -> None:
    """Run a short scripted conversation and report each contract clause; exit 0 only if all hold."""
    import attrs
    import trio

    from ._check import run_check
    from ._cli_run import build_launch, fail
    from ._plugins import get_plugins
    from .errors import AgentrtError

    env = dict(os.environ)
    launch = build_launch(env, protocol, model, agent)
    try:
        plugins = get_plugins()
        plugins.dialect(launch.protocol)
        clauses = trio.run(lambda: run_check(launch, plugins=plugins, parent_env=env, turn_timeout=turn_timeout))
    except AgentrtError as exc:
        fail(exc.code, exc.detail, 2 if exc.code != "spawn_failed" else 3)
    ok = all(c.status == "pass" for c in clauses)
    if as_json:
        click.echo(json.dumps({"ok": ok, "clauses": [attrs.asdict(c) for c in clauses]}, indent=2))
    else:
        for c in clauses:
            mark = "PASS" if c.status == "pass" else "FAIL"
            detail = f"  ({c.detail})" if c.detail else ""
            click.echo(f"{mark}  {c.id}: {c.title}{detail}")
        click.echo("all clauses hold" if ok else "some clauses do not hold")
    sys.exit(0 if ok else 1)
