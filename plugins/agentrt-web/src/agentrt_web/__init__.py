"""Hook implementations of the web UI plugin (thin: the server modules load only when it runs)."""

from __future__ import annotations

from typing import Any

from agentrt import hookimpl


@hookimpl
def agentrt_register_commands(cli: Any) -> None:
    """``agentrt web`` (starlette, hypercorn and the rest are imported only when it runs)."""
    import click

    class _LazyWeb(click.Command):
        def _real(self) -> click.Command:
            from ._cli import web

            return web

        def get_params(self, ctx: click.Context) -> list[click.Parameter]:
            return self._real().get_params(ctx)

        def invoke(self, ctx: click.Context) -> Any:
            return self._real().invoke(ctx)

        def make_context(
            self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
        ) -> click.Context:
            return self._real().make_context(info_name, args, parent=parent, **extra)

    cli.add_command(_LazyWeb(name="web", help="Serve the web UI: chat, threads and bots in a browser."))
