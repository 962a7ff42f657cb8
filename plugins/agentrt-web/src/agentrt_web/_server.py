"""Running the web UI: hypercorn's trio worker inside the runtime's nursery.

:func:`serve_web` owns one nursery holding the HTTP server, the open threads'
agent processes and the bot supervisor.  Stopping (``stop`` is set, or
SIGINT/SIGTERM in the command) closes the hub first, which ends every
server-sent-event stream at once, then triggers hypercorn's shutdown, then
stops the agents and the supervisor (each bounded).  So shutdown never waits
for browsers to hang up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from agentrt.errors import AgentrtError
from agentrt.net import is_loopback_host
from agentrt.threads import AsyncClosable

__all__ = ["WebOptions", "serve_web", "resolve_token"]

@attrs.frozen(kw_only=True)
class WebOptions:
    """How to serve."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    supervise_bots: bool = True
    agent: str | None = None
    """A named agent of the config file (else ``default_agent`` / the launch contract)."""
    approval: Mapping[str, Any] = attrs.field(factory=dict)
    """``--allow-tool`` / ``--deny-tool`` / ``--permission-mode`` / ``--ask-timeout`` of ``agentrt web``."""
    term_grace: float | None = None
    added_sinks: tuple[str, ...] = ()
    """The role-less sinks ``--sink`` names, added to each thread's conversation."""
    #: How long hypercorn lets open responses finish at shutdown (the hub ends ours first).
    graceful_timeout: float = 2.0


def resolve_token(env: Mapping[str, str]) -> str | None:
    """The configured access token: ``AGENTRT_WEB_TOKEN``, else ``AGENTRT_WEB_PASSWORD`` (blank is none)."""
    for key in ("AGENTRT_WEB_TOKEN", "AGENTRT_WEB_PASSWORD"):
        value = env.get(key, "").strip()
        if value:
            if len(value) < 8:
                raise AgentrtError("web_token_too_short", f"{key} must be at least 8 characters")
            return value
    return None


async def serve_web(
    options: WebOptions,
    *,
    env: Mapping[str, str] | None = None,
    stop: trio.Event | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until ``stop`` is set; ``task_status.started`` gets the bound URLs (``state`` after)."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from agentrt import get_plugins
    from agentrt.config import resolve_agent

    from ._agents import ThreadAgent, WebAgents
    from ._app import WebState, build_app
    from ._bots import BotManager
    from ._chat import ChatManager
    from ._hub import Hub
    from ._sessions import Sessions

    env = dict(os.environ if env is None else env)
    loopback = is_loopback_host(options.host)
    if not loopback and not options.token:
        raise AgentrtError(
            "web_token_required",
            f"binding {options.host!r} (not loopback) needs AGENTRT_WEB_TOKEN or AGENTRT_WEB_PASSWORD",
        )
    plugins = get_plugins()
    resolved = resolve_agent(env, options.agent)
    launch = resolved.launch
    store = plugins.thread_store(env)
    if store is None:
        raise AgentrtError("thread_store_unavailable", "agentrt web needs a thread store plugin (agentrt-sqlite)")
    # Open the database now (any lookup does): a corrupt or foreign file is the store's own
    # coded error (database_unavailable) at start-up, not a failure on every page and poll.
    await store.get_thread("agentrt-web-start-up")
    stop = trio.Event() if stop is None else stop
    hub = Hub()
    server_done = trio.Event()

    async def shutdown_trigger() -> None:
        await stop.wait()
        hub.close()  # our own streams first: hypercorn then has no open response to wait for

    config = Config()
    config.bind = [f"[{options.host}]:{options.port}" if ":" in options.host else f"{options.host}:{options.port}"]
    config.graceful_timeout = options.graceful_timeout
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.keep_alive_timeout = 5.0

    async with trio.open_nursery() as nursery:
        agents = WebAgents(ThreadAgent(name=resolved.name, launch=launch, permissions=resolved.permissions,
                                       first_output_timeout=resolved.first_output_timeout),
                           env, resolved.config)
        chats = ChatManager(nursery, plugins=plugins, env=env, hub=hub, store=store, launch=launch,
                            term_grace=options.term_grace, agent=resolved.name, approval=options.approval,
                            permissions=resolved.permissions, agents=agents, added_sinks=options.added_sinks)
        bots = BotManager(nursery, hub=hub, env=env, supervise=options.supervise_bots)
        state = WebState(hub=hub, chats=chats, bots=bots, sessions=Sessions(), token=options.token)
        app = build_app(state, loopback_only=loopback)
        try:
            nursery.start_soon(hub.heartbeat)
            await bots.start()

            async def run_server(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                try:
                    await serve(app, config, shutdown_trigger=shutdown_trigger, task_status=task_status)
                finally:
                    server_done.set()

            urls: list[str] = await nursery.start(run_server)
            if on_ready is not None:
                on_ready(urls)
            task_status.started(state)
            await server_done.wait()
        finally:
            stop.set()
            hub.close()
            with trio.CancelScope(shield=True):
                await chats.aclose()
                await bots.aclose()
                if isinstance(store, AsyncClosable):
                    with trio.move_on_after(5):
                        await store.aclose()
            nursery.cancel_scope.cancel()


def announce(urls: list[str]) -> None:
    """Print where the server listens (the first line the command prints; tests read it)."""
    for url in urls:
        print(f"agentrt web: serving on {url}", flush=True)
    sys.stdout.flush()
