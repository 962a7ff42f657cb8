"""``agentrt bots``: manage supervised FastAgent weixin bots.

Every command works on the bot store (a plugin's, else the JSON store).  A
running ``agentrt bots supervise`` reads the desired states from that same
store on every reconciler pass, so ``start``/``stop``/``restart`` from another
terminal take effect within ``reconcile_interval`` seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import attrs
import click
import trio

from agentrt.bots import AtomicBotStore, BotRecord
from agentrt.errors import AgentrtError
from agentrt.events import EventBatch, Lifecycle, StateChanged, to_json

from ._config import BotsConfig, load_config
from ._launch import check_bot_id
from ._schema import normalize_qr_url
from ._store import JsonFileBotStore, TimelineSink

__all__ = [
    "cmd_add", "cmd_list", "cmd_start", "cmd_stop", "cmd_restart", "cmd_remove", "cmd_logs", "cmd_qr",
    "cmd_supervise", "open_store", "PrintSink",
]  # fmt: skip

T = TypeVar("T")


def _run(fn: Callable[[BotsConfig, Any, Mapping[str, str]], Awaitable[T]], **extra_env: str) -> T:
    """Load config and store, run ``fn`` under trio; AgentrtError becomes exit code 2."""
    env = {**os.environ, **extra_env}
    try:
        cfg = load_config(env)
        store, _kind = open_store(cfg, env)
        return trio.run(fn, cfg, store, env)
    except AgentrtError as exc:
        click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
        sys.exit(2)


def open_store(cfg: BotsConfig, env: Mapping[str, str]) -> tuple[Any, str]:
    """The bot store: Redis (``AGENTRT_BOTS_REDIS_URL``), a plugin's (``store = "auto"|"plugin"``), else JSON."""
    if env.get("AGENTRT_BOTS_REDIS_URL"):
        from ._redis_store import RedisBotStore

        return RedisBotStore(env["AGENTRT_BOTS_REDIS_URL"]), "redis"
    if cfg.store in ("auto", "plugin"):
        from agentrt import get_plugins

        store = get_plugins().bot_store(env)
        if store is not None:
            return store, "plugin"
        if cfg.store == "plugin":
            raise AgentrtError("bot_store_unavailable", "no plugin provides a bot store")
    return JsonFileBotStore(cfg.store_dir), "json"


async def _known(store: Any, bot_id: str) -> BotRecord:
    rec: BotRecord | None = await store.get_bot(check_bot_id(bot_id))
    if rec is None:
        raise AgentrtError("unknown_bot", f"no bot named {bot_id!r} (add it with `agentrt bots add`)")
    return rec


def _record_json(rec: BotRecord) -> dict[str, Any]:
    return attrs.asdict(rec)


@click.command(name="add")
@click.argument("name")
@click.option("--profile", help="LLM profile name from bots.toml.")
@click.option("--sandbox-mode", type=click.Choice(["disabled", "remote"]), default=None)
@click.option("--sandbox-url", help="Remote sandbox URL (remote mode).")
@click.option("--sandbox-api-key-env", help="Name of the variable holding the sandbox API key.")
@click.option("--start", "start_now", is_flag=True, help="Also set its desired state to running.")
def cmd_add(
    name: str,
    profile: str | None,
    sandbox_mode: str | None,
    sandbox_url: str | None,
    sandbox_api_key_env: str | None,
    start_now: bool,
) -> None:
    """Add a bot (or update its settings)."""
    settings = {
        k: v
        for k, v in {
            "profile": profile, "sandbox_mode": sandbox_mode, "sandbox_url": sandbox_url,
            "sandbox_api_key_env": sandbox_api_key_env,
        }.items()
        if v is not None
    }  # fmt: skip

    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> None:
        check_bot_id(name)
        rec = await store.get_bot(name) or BotRecord(bot_id=name)
        rec = attrs.evolve(rec, config={**dict(rec.config or {}), **settings})
        if start_now:
            rec = _want_running(rec)
        await store.save_bot(rec)
        click.echo(f"{name}: added (desired {rec.desired_state})")

    _run(go)


def _want_running(rec: BotRecord) -> BotRecord:
    if rec.status == "failed":
        return attrs.evolve(rec, desired_state="running", status="stopped", restart_count=0, backoff_until=None)
    return attrs.evolve(rec, desired_state="running")


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per bot.")
def cmd_list(as_json: bool) -> None:
    """List bots with their desired state, status and last error."""

    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> None:
        bots = {r.bot_id: r for r in await store.list_bots()}
        for name in cfg.bots:
            bots.setdefault(name, BotRecord(bot_id=name))
        for name in sorted(bots):
            rec = bots[name]
            if as_json:
                click.echo(json.dumps(_record_json(rec), sort_keys=True))
                continue
            err = f"  {rec.last_error_code}: {rec.last_error_message}" if rec.last_error_code else ""
            pid = f" pid {rec.pid}" if rec.pid else ""
            click.echo(
                f"{name}  desired={rec.desired_state} status={rec.status}{pid} restarts={rec.restart_count}{err}"
            )
        if not bots and not as_json:
            click.echo("no bots (add one with `agentrt bots add NAME --profile P`)")

    _run(go)


def _desired(name: str, change: Callable[[BotRecord], BotRecord], verb: str) -> None:
    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> None:
        check_bot_id(name)
        rec = await store.get_bot(name)
        if rec is None and name in cfg.bots:
            await store.save_bot(BotRecord(bot_id=name))
        elif rec is None:
            raise AgentrtError("unknown_bot", f"no bot named {name!r} (add it with `agentrt bots add`)")
        if isinstance(store, AtomicBotStore):  # atomic against a running supervisor
            await store.update_bot(name, change)
        else:
            await store.save_bot(change(await _known(store, name)))
        click.echo(f"{name}: {verb} (a running `agentrt bots supervise` applies it)")

    _run(go)


@click.command(name="start")
@click.argument("name")
def cmd_start(name: str) -> None:
    """Set a bot's desired state to running (a failed bot is reset)."""
    _desired(name, _want_running, "start requested")


@click.command(name="stop")
@click.argument("name")
def cmd_stop(name: str) -> None:
    """Set a bot's desired state to stopped."""
    _desired(name, lambda r: attrs.evolve(r, desired_state="stopped"), "stop requested")


@click.command(name="restart")
@click.argument("name")
def cmd_restart(name: str) -> None:
    """Stop the bot's process if any, reset its crash count and start it again."""
    _desired(name, lambda r: attrs.evolve(r, desired_state="restart"), "restart requested")


@click.command(name="remove")
@click.argument("name")
def cmd_remove(name: str) -> None:
    """Forget a stopped bot and its timeline (its instance directory is kept)."""

    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> None:
        rec = await _known(store, name)
        if rec.status not in ("stopped", "failed") or rec.pid is not None:
            raise AgentrtError("bot_not_stopped", f"stop {name!r} first (status {rec.status})")
        await store.delete_bot(name)
        click.echo(f"{name}: removed")

    _run(go)


@click.command(name="logs")
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0)
@click.option("--json", "as_json", is_flag=True, help="Print timeline entries as JSON lines.")
@click.option("--stderr", "show_stderr", is_flag=True, help="Print the FastAgent stderr log instead.")
def cmd_logs(name: str, limit: int, offset: int, as_json: bool, show_stderr: bool) -> None:
    """Show a bot's lifecycle timeline (or its stderr log)."""

    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> None:
        await _known(store, name)
        if show_stderr:
            path = trio.Path(cfg.instances_dir / name / "logs" / "fastagent.stderr.log")
            if await path.exists():
                click.echo(await path.read_text(errors="replace"), nl=False)
            return
        for entry in await store.timeline(name, offset=offset, limit=limit):
            if as_json:
                click.echo(json.dumps(entry, sort_keys=True, default=str))
            else:
                payload = entry.get("payload") or {}
                stamp = payload.get("timestamp") or ""
                click.echo(f"{stamp}  {entry.get('type')}  {entry.get('message')}  {json.dumps(payload.get('data'))}")

    _run(go)


@click.command(name="qr")
@click.argument("name")
@click.option("--url", "url_only", is_flag=True, help="Print the URL instead of drawing the code.")
@click.option("--reissue", is_flag=True, help="Forget the weixin login and restart the bot for a new QR code.")
def cmd_qr(name: str, url_only: bool, reissue: bool) -> None:
    """Draw the bot's current weixin login QR code in the terminal."""
    if reissue:
        _desired(name, lambda r: attrs.evolve(r, desired_state="reissue_qr"), "QR reissue requested")
        return

    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> None:
        rec = await _known(store, name)
        # Re-validate: only a trusted weixin login URL is ever displayed.
        url = normalize_qr_url(rec.last_qr_code_url)
        if url is None or rec.status != "waiting_for_qr":
            raise AgentrtError("no_qr_code", f"{name!r} is not waiting for a QR login (status {rec.status})")
        if url_only:
            click.echo(url)
            return
        import segno

        segno.make(url, error="m").terminal(out=sys.stdout, compact=True)
        click.echo(f"{name}: scan with weixin (code {rec.last_qr_code_id})")

    _run(go)


class PrintSink:
    """Prints state changes and lifecycle events, as JSON lines or for people."""

    name = "print"
    policy = "block"
    buffer_size = 1024

    def __init__(self, *, as_json: bool, out: Any = None) -> None:
        self._json = as_json
        self._out = out

    async def handle(self, batch: EventBatch) -> None:
        """Print the batch's lifecycle events and state changes."""
        out = self._out or sys.stdout
        for i, ev in enumerate(batch.events):
            if not isinstance(ev, Lifecycle | StateChanged):
                continue
            if self._json:
                line = json.dumps(
                    {"bot": batch.source, "seq": batch.first_seq + i, "wall": batch.wall, "event": to_json(ev)},
                    default=str,
                )
            elif isinstance(ev, StateChanged):
                why = f" ({ev.reason})" if ev.reason else ""
                line = f"{batch.source}: {ev.previous} -> {ev.state}{why}"
            else:
                line = f"{batch.source}: {ev.kind}: {ev.message}"
            out.write(line + "\n")
        out.flush()

    async def aclose(self) -> None:
        """Flush the output."""
        (self._out or sys.stdout).flush()


@click.command(name="supervise")
@click.option("--json", "as_json", is_flag=True, help="One state change or lifecycle event per line.")
@click.option("--redis", "redis_url", metavar="URL", help="Share the bots with other nodes through this Redis "
              "(default $AGENTRT_BOTS_REDIS_URL).")  # fmt: skip
@click.option("--node", help="This node's unique name among those sharing the Redis (default: the host name).")
@click.option("--max-bots", type=click.IntRange(0), default=None, help="Run at most N bots on this node.")
@click.option("--lease-ttl", type=click.FloatRange(min=0, min_open=True), default=15.0, show_default=True,
              help="Seconds a bot's lease lasts unrenewed (renewed every third of it).")  # fmt: skip
def cmd_supervise(
    as_json: bool, redis_url: str | None, node: str | None, max_bots: int | None, lease_ttl: float
) -> None:
    """Run the supervisor in the foreground for every bot (Ctrl-C stops the bots and exits).

    With --redis (or $AGENTRT_BOTS_REDIS_URL) several nodes share the bots: each bot
    runs on at most one of them at a time, and moves when its node dies.
    SIGINT and SIGTERM run the bounded stop of every bot, then exit 130 or 143.
    """
    if (node is not None or max_bots is not None) and not (redis_url or os.environ.get("AGENTRT_BOTS_REDIS_URL")):
        click.echo("agentrt: error: redis_required: --node and --max-bots need --redis URL", err=True)
        sys.exit(2)

    async def go(cfg: BotsConfig, store: Any, env: Mapping[str, str]) -> int:
        from ._supervisor import open_supervisor

        for name in cfg.bots:  # bots declared in the file exist in the store
            if await store.get_bot(name) is None:
                await store.save_bot(BotRecord(bot_id=name))
        if env.get("AGENTRT_BOTS_REDIS_URL"):
            return await _supervise_shared(cfg, env, as_json, node, max_bots, lease_ttl)
        sinks: list[Any] = [PrintSink(as_json=as_json)]
        if isinstance(store, JsonFileBotStore):  # it keeps its own timeline file
            sinks.append(TimelineSink(store))
        else:
            from agentrt import get_plugins

            factory = get_plugins().sink_for("recorder")
            options = {"env": dict(env), "dialect": "fastagent"}
            sinks.append(factory(options) if factory is not None else TimelineSink(store))
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with open_supervisor(
                store, config=cfg.supervisor_config(env), resolve=cfg.resolver(env), sinks=sinks
            ):
                async for sig in signals:
                    return int(sig)
        return 0

    received = _run(go, **({"AGENTRT_BOTS_REDIS_URL": redis_url} if redis_url else {}))
    if received:
        sys.exit(128 + received)  # the shell's convention for "ended by this signal"


async def _supervise_shared(
    cfg: BotsConfig, env: Mapping[str, str], as_json: bool, node: str | None,
    max_bots: int | None, lease_ttl: float,
) -> int:  # fmt: skip
    """``supervise --redis``: this node runs the bots whose leases it holds."""
    import socket

    from ._lease import LeaseConfig, open_shared_supervisor
    from ._redis_store import RedisBotStore

    sup_cfg = cfg.supervisor_config(env)
    lease = LeaseConfig(
        node=node or socket.gethostname(), ttl=lease_ttl, max_bots=max_bots,
        stop_budget=sup_cfg.term_grace + sup_cfg.exit_grace + 1.0,
    )  # fmt: skip
    sinks: list[Any] = [PrintSink(as_json=as_json)]
    # Every call bounded well inside a renewal interval: a lost Redis shows up in time.
    store = RedisBotStore(env["AGENTRT_BOTS_REDIS_URL"], command_timeout=lease.call_timeout)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_shared_supervisor(store, lease, config=sup_cfg, resolve=cfg.resolver(env), sinks=sinks):
            print(f"agentrt: node {lease.node} supervising bots shared through redis", file=sys.stderr, flush=True)
            async for sig in signals:
                return int(sig)
    return 0
