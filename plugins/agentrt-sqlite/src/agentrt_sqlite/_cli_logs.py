"""``agentrt logs``: recorded turns, newest first, with full-text search."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import attrs
import click
import orjson

from agentrt.display import escape_text
from agentrt.errors import AgentrtError

from ._cli import _run, _when


def _clip(text: str | None, width: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command()
@click.option("-n", "--count", "count", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many turns to show (0: all).")
@click.option("-q", "--query", "--search", "query",
              help="Full-text search (FTS5) over prompts and final replies (every word must match).")
@click.option("-a", "--agent", help="Only conversations of this configured agent.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per turn.")
@click.option("--full", is_flag=True,
              help="Print whole prompts and replies (with --approvals: whole inputs), not one line each.")
@click.option("--approvals", is_flag=True, help="List tool-approval decisions instead of turns.")
@click.option("--prune", is_flag=True,
              help="Remove whole conversations, oldest first, past [logs] max_age_days / max_size_mb.")
@click.option("--max-age-days", type=click.FloatRange(min=0, min_open=True), metavar="DAYS",
              help="With --prune: remove conversations started longer ago (wins over the config).")
@click.option("--max-size-mb", type=click.FloatRange(min=0, min_open=True), metavar="MB",
              help="With --prune: remove the oldest conversations until the data fits (wins over the config).")
def logs(count: int, query: str | None, agent: str | None, as_json: bool, full: bool, approvals: bool,
         prune: bool = False, max_age_days: float | None = None, max_size_mb: float | None = None) -> None:
    """Recorded run, chat and web turns, newest first."""
    if prune or max_age_days is not None or max_size_mb is not None:
        _prune(prune, max_age_days, max_size_mb, as_json)
        return
    if approvals:
        _approvals(count, agent, as_json, full)
        return
    rows = _run(lambda s: s.search_logs(limit=count, query=query, agent=agent))
    if as_json:
        sys.stdout.write("".join(orjson.dumps(r).decode() + "\n" for r in rows))
        return
    if not rows:
        click.echo("no matching turns" if query or agent else "nothing recorded yet")
        return
    for r in rows:
        where = f"thread {r['thread']}" if r["thread"] else f"conversation {r['conversation_id']}"
        # The agent's configured name (what -a takes), its dialect beside it.
        who = f"{r['agent']} ({r['dialect']})" if r["agent"] and r["dialect"] else r["agent"] or r["dialect"] or "-"
        outcome = r["outcome"] if r["code"] is None else f"{r['outcome']} ({r['code']})"
        if full:
            click.echo(f"## {_when(r['started_at'])}  {who}  {where}  {outcome}\n")
            click.echo(f"> {r['prompt']}\n\n{r['reply'] or ''}\n")
        else:
            click.echo(f"{_when(r['started_at'])}  {who:<12} {outcome:<10} {_clip(r['prompt'], 40):<40}  "
                       f"{_clip(r['reply'], 60)}")


def _prune(prune: bool, max_age_days: float | None, max_size_mb: float | None, as_json: bool) -> None:
    from agentrt.config import load_config

    def usage(code: str, message: str) -> NoReturn:
        click.echo(f"agentrt: error: {code}: {message}", err=True)
        sys.exit(2)

    if not prune:
        usage("usage_error", "--max-age-days and --max-size-mb go with --prune")
    try:
        config = load_config(dict(os.environ))
    except AgentrtError as exc:
        usage(exc.code, exc.detail)
    days = max_age_days if max_age_days is not None else config.logs_max_age_days
    mb = max_size_mb if max_size_mb is not None else config.logs_max_size_mb
    if days is None and mb is None:
        usage("no_retention_limit", "set [logs] max_age_days or max_size_mb in the config file, "
              "or give --max-age-days / --max-size-mb")
    size = None if mb is None else int(mb * 1_000_000)
    report = _run(lambda s: s.prune(max_age_days=days, max_size_bytes=size), timeout=3600)
    if as_json:
        click.echo(orjson.dumps({**attrs.asdict(report), "max_age_days": days, "max_size_mb": mb}).decode())
        return
    mib = f"{report.size_before / 1e6:.1f} MB → {report.size_after / 1e6:.1f} MB"  # database and transcripts
    if not report.conversations:
        click.echo(f"nothing to remove ({mib})")
        return
    click.echo(f"removed {report.conversations} conversations ({report.turns} turns, {report.transcripts} "
               f"transcripts, {report.events} event rows, {report.approvals} approval decisions) started "
               f"{_when(report.first_started)} to {_when(report.last_started)}; database and transcripts {mib}"
               + ("" if report.compacted else " (not compacted: busy; the space is reused)"))


def _approvals(count: int, agent: str | None, as_json: bool, full: bool) -> None:
    rows = _run(lambda s: s.list_approvals(limit=count, agent=agent))
    # What an agent wrote (tool names, inputs) is shown escaped: no escape sequence reaches the terminal,
    # also from a row recorded before summaries were escaped.
    for r in rows:
        for key in ("tool", "summary", "by", "thread"):
            if isinstance(r.get(key), str):
                r[key] = escape_text(r[key])
    if as_json:
        sys.stdout.write("".join(orjson.dumps(r).decode() + "\n" for r in rows))
        return
    if not rows:
        click.echo("no tool-approval decisions recorded")
        return
    for r in rows:
        where = f"thread {r['thread']}" if r["thread"] else f"conversation {r['conversation_id'] or '-'}"
        if full:
            click.echo(f"## {_when(r['at'])}  {r['decision']}  {r['tool']}  by {r['by']}  ({where})\n")
            click.echo(f"{r['summary']}\n")
            continue
        click.echo(f"{_when(r['at'])}  {r['decision']:<5}  {_clip(r['tool'], 24):<24} {_clip(r['summary'], 50):<50}  "
                   f"by {r['by']}  ({where})")
