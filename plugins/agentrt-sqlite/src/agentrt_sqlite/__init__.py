"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentrt import hookimpl

if TYPE_CHECKING:
    from agentrt.sinks import SinkRegister

    from ._sink import SqliteSink
    from ._store import SqliteStore


def _sink_factory(options: Mapping[str, Any]) -> SqliteSink:
    from ._sink import make_sink

    return make_sink(options)


def _open_store(env: Mapping[str, str]) -> SqliteStore:
    from ._location import database_path
    from ._store import SqliteStore

    return SqliteStore(database_path(env))


@hookimpl
def agentrt_register_sinks(register: SinkRegister) -> None:
    """The ``sqlite`` sink, the recorder: every event, conversation and turn in the database."""
    register("sqlite", _sink_factory, role="recorder")


@hookimpl
def agentrt_register_commands(cli: Any) -> None:
    """``agentrt threads`` and ``agentrt logs`` (their modules are imported only when they run)."""
    import click

    class _Lazy(click.Group):
        def _real(self) -> click.Group:
            from ._cli import threads

            return threads

        def list_commands(self, ctx: click.Context) -> list[str]:
            return self._real().list_commands(ctx)

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            return self._real().get_command(ctx, name)

    cli.add_command(_Lazy(name="threads", help="List, show, rename, export and remove named threads."))

    class _LazyLogs(click.Command):
        def _real(self) -> click.Command:
            from ._cli_logs import logs

            return logs

        def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
            return self._real().make_context(info_name, args, parent=parent, **extra)

    cli.add_command(_LazyLogs(name="logs", help="Recorded run, chat and web turns, newest first; -q searches them."))


@hookimpl
def agentrt_thread_store(env: Mapping[str, str]) -> SqliteStore:
    """Named threads with their native session ids, in the database."""
    return _open_store(env)


@hookimpl
def agentrt_bot_store(env: Mapping[str, str]) -> SqliteStore:
    """Supervised bots' records, state history and timeline, in the database."""
    return _open_store(env)
