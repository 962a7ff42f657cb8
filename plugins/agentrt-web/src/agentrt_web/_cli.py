"""``agentrt web``: serve the web UI (chat, threads and bots) until Ctrl-C."""

from __future__ import annotations

import os
import signal
import sys

import click
import trio

from agentrt.errors import AgentrtError


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback requires AGENTRT_WEB_TOKEN (or AGENTRT_WEB_PASSWORD).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0: any free port; the URL is printed).")
@click.option("--no-bots", is_flag=True, help="Do not run the FastAgent bot supervisor in this server.")
@click.option("-a", "--agent", help="Named agent from the config file for new chats (default: default_agent).")
def web(host: str, port: int, no_bots: bool, agent: str | None) -> None:
    """Serve the web UI: chat, threads and bots in a browser."""
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
        opts = WebOptions(host=host, port=port, token=resolve_token(env), supervise_bots=not no_bots,
                          agent=agent)
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
