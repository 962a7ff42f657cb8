"""``agentrt web``: serve the web UI (chat, threads and bots) until Ctrl-C."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import click
import trio

from agentrt.approval import approval_options
from agentrt.errors import AgentrtError
from agentrt.sinks import sink_options


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback requires AGENTRT_WEB_TOKEN (or AGENTRT_WEB_PASSWORD).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0: any free port; the URL is printed).")
@click.option("--no-bots", is_flag=True, help="Do not run the FastAgent bot supervisor in this server.")
@click.option("-a", "--agent", help="Named agent from the config file for new chats (default: default_agent).")
@approval_options
@sink_options
def web(host: str, port: int, no_bots: bool, agent: str | None, sinks: tuple[str, ...] = (),
        **approval: Any) -> None:
    """Serve the web UI: chat, threads and bots in a browser.

    With --permission-mode ask (the default) a tool no rule decides shows an
    approval card with Approve / Deny on the thread's page.
    """
    from ._server import WebOptions, announce, resolve_token, serve_web

    env = dict(os.environ)

    stopped_by: list[int] = []

    async def main() -> None:
        stop = trio.Event()
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for sig in signals:
                        stopped_by.append(sig)
                        stop.set()
                        return

            nursery.start_soon(on_signal)
            await serve_web(opts, env=env, stop=stop, on_ready=announce)
            nursery.cancel_scope.cancel()

    def leaf(exc: BaseException) -> BaseException:
        # Nurseries wrap a lone failure in a group; the user wants the failure itself.
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return exc

    try:
        from agentrt.approval import build_approval_policy

        # Check the patterns now: a typo is a usage error, not a failure at the first tool.
        build_approval_policy(default_mode="ask", config=None, **approval)
        from agentrt import get_plugins
        from agentrt.sinks import apply_sink_choice

        plugins = get_plugins()
        added = apply_sink_choice(plugins, sinks)
        # A recorder that cannot be chosen (ambiguous_sink_role, unknown_sink) is a usage error now,
        # not a failure at the first thread opened.
        plugins.sink_for("recorder")
        opts = WebOptions(host=host, port=port, token=resolve_token(env), supervise_bots=not no_bots,
                          agent=agent, approval=approval, added_sinks=added)
        try:
            trio.run(main)
        except BaseExceptionGroup as group:
            raise leaf(group) from None
    except AgentrtError as exc:
        click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"agentrt: error: web_bind_failed: cannot listen on {host}:{port}: {exc.strerror}", err=True)
        sys.exit(2)
    if stopped_by:
        # Stopped by a signal (after the bounded stop of every agent): 130 / 143, as a shell expects.
        sys.exit(128 + stopped_by[0])
