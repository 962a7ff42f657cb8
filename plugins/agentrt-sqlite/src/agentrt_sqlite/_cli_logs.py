"""``agentrt logs``: recorded turns, newest first, with full-text search."""

from __future__ import annotations

import sys

import click
import orjson

from agentrt.display import escape_text

from ._cli import _run, _when


def _clip(text: str | None, width: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command()
@click.option("-n", "--count", "count", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many turns to show (0: all).")
@click.option("-q", "--query", help="Full-text search over prompts and replies (every word must match).")
@click.option("-a", "--agent", help="Only conversations of this configured agent.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per turn.")
@click.option("--full", is_flag=True,
              help="Print whole prompts and replies (with --approvals: whole inputs), not one line each.")
@click.option("--approvals", is_flag=True, help="List tool-approval decisions instead of turns.")
def logs(count: int, query: str | None, agent: str | None, as_json: bool, full: bool, approvals: bool) -> None:
    """Recorded run, chat and web turns, newest first."""
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
        who = r["agent"] or r["dialect"] or "-"
        outcome = r["outcome"] if r["code"] is None else f"{r['outcome']} ({r['code']})"
        if full:
            click.echo(f"## {_when(r['started_at'])}  {who}  {where}  {outcome}\n")
            click.echo(f"> {r['prompt']}\n\n{r['reply'] or ''}\n")
        else:
            click.echo(f"{_when(r['started_at'])}  {who:<12} {outcome:<10} {_clip(r['prompt'], 40):<40}  "
                       f"{_clip(r['reply'], 60)}")


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
