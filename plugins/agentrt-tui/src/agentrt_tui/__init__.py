"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentrt import hookimpl

if TYPE_CHECKING:
    from agentrt.sinks import SinkRegister

    from ._sink import TuiSink


def _sink_factory(options: Mapping[str, Any]) -> TuiSink:
    from ._sink import make_sink

    return make_sink(options)


@hookimpl
def agentrt_register_sinks(register: SinkRegister) -> None:
    """The ``tui`` sink: the terminal UI (the ``terminal`` role)."""
    register("tui", _sink_factory, role="terminal")


@hookimpl
def agentrt_register_commands(cli: Any) -> None:
    """``agentrt chat`` (its module, and rich, are imported only when it runs)."""
    import click

    class _LazyChat(click.Command):
        def _real(self) -> click.Command:
            from ._chat import chat

            return chat

        def get_params(self, ctx: click.Context) -> list[click.Parameter]:
            return self._real().get_params(ctx)

        def invoke(self, ctx: click.Context) -> Any:
            return self._real().invoke(ctx)

        def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                         **extra: Any) -> click.Context:
            return self._real().make_context(info_name, args, parent=parent, **extra)

    cli.add_command(_LazyChat(name="chat", help="Talk with an agent, turn by turn, in the terminal."))
