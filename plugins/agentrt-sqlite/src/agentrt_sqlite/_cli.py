"""``agentrt threads``: list, show, rename, export and remove named threads."""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
import orjson
import trio

from agentrt.errors import AgentrtError

from ._store import SqliteStore

T = TypeVar("T")


def _run(fn: Callable[[SqliteStore], Awaitable[T]], timeout: float = 30) -> T:
    from ._location import database_path

    async def main() -> T:
        store = SqliteStore(database_path(os.environ))
        try:
            with trio.fail_after(timeout):
                return await fn(store)
        finally:
            await store.aclose()

    try:
        return trio.run(main)
    except AgentrtError as exc:
        click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
        sys.exit(2)
    except trio.TooSlowError:
        click.echo("agentrt: error: database_timeout: the database did not answer in time", err=True)
        sys.exit(2)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@click.group()
def threads() -> None:
    """List, show, rename, export and remove named threads."""


@threads.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the threads as JSON lines.")
def list_cmd(as_json: bool) -> None:
    """Every named thread, most recently used first."""
    rows = _run(lambda s: s.list_threads())
    if as_json:
        for r in rows:
            rec = r.record
            click.echo(orjson.dumps({
                "name": rec.name, "dialect": rec.dialect, "executable": rec.executable,
                "model": rec.model, "session_id": rec.session_id, "turns": r.turns,
                "created_at": r.created_at, "updated_at": r.updated_at,
            }).decode())
        return
    if not rows:
        click.echo("no threads")
        return
    for r in rows:
        rec = r.record
        click.echo(f"{rec.name}\t{r.turns} turns\t{rec.dialect}\t{rec.model or '-'}\t{_when(r.updated_at)}")


def _require(found: Any, name: str) -> None:
    if found is None:
        click.echo(f"agentrt: error: unknown_thread: no thread named {name!r}", err=True)
        sys.exit(1)


@threads.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The record and its turns as one JSON object.")
def show_cmd(name: str, as_json: bool) -> None:
    """A thread's record and its turns."""

    async def q(s: SqliteStore) -> Any:
        record, diag = await s.check_thread(name)
        return record, diag, (await s.thread_turns(name)) if record else []

    record, diag, turns = _run(q)
    _require(record, name)
    if diag is not None:
        click.echo(f"warning: {diag.code}: {diag.detail}", err=True)
    if as_json:
        click.echo(orjson.dumps({
            "name": record.name, "dialect": record.dialect, "executable": record.executable,
            "model": record.model, "session_id": record.session_id, "turns": turns,
        }).decode())
        return
    click.echo(f"thread:     {record.name}")
    click.echo(f"dialect:    {record.dialect}")
    click.echo(f"executable: {record.executable}")
    click.echo(f"model:      {record.model or '-'}")
    click.echo(f"session:    {record.session_id or '-'}")
    click.echo(f"turns:      {len(turns)}")
    for t in turns:
        outcome = t["outcome"] if t["code"] is None else f"{t['outcome']} ({t['code']})"
        prompt = " ".join(t["prompt"].split())
        if len(prompt) > 60:
            prompt = prompt[:59] + "…"
        click.echo(f"  {_when(t['started_at'])}  {outcome:<10} {prompt}")


@threads.command("rename")
@click.argument("old")
@click.argument("new")
def rename_cmd(old: str, new: str) -> None:
    """Give a thread a new name (its history and session go with it)."""
    if not _run(lambda s: s.rename_thread(old, new)):
        _require(None, old)
    click.echo(f"renamed {old} to {new}")


@threads.command("export")
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "markdown"]), default="markdown",
              show_default=True, help="jsonl: every stored event envelope; markdown: the turns.")
def export_cmd(name: str, fmt: str) -> None:
    """Write a thread to stdout, as Markdown (the turns) or JSON Lines (every event)."""

    async def q(s: SqliteStore) -> Any:
        record, _ = await s.check_thread(name)
        if record is None:
            return None
        if fmt == "jsonl":
            # Page through the events so a long thread never sits in memory at once.
            cursor = 0
            while True:
                page, cursor = await s.thread_events(name, after=cursor)
                if not page:
                    break
                text = "".join(orjson.dumps(env).decode() + "\n" for env in page)
                await trio.to_thread.run_sync(sys.stdout.write, text)
            return record
        turns = await s.thread_turns(name)
        parts = [f"# {record.name}\n"]
        for t in turns:
            parts.append(f"\n## User\n\n{t['prompt']}\n\n## Assistant\n\n{t['reply'] or ''}\n")
            if t["outcome"] == "failed":
                parts.append(f"\n> turn failed: {t['code']}\n")
        await trio.to_thread.run_sync(sys.stdout.write, "".join(parts))
        return record

    # A long thread takes a while to write out; the bound is generous.
    _require(_run(q, timeout=600), name)


@threads.command("rm")
@click.argument("name")
def rm_cmd(name: str) -> None:
    """Forget a thread, with its conversations, turns and events."""
    if not _run(lambda s: s.delete_thread(name)):
        _require(None, name)
    click.echo(f"removed {name}")
