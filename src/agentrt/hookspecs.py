"""Every hook a plugin can implement.  The docstrings are the documentation.

pluggy is synchronous: hooks *register* capabilities (named factories) and
return quickly; the runtime creates and awaits the objects later, inside its own
nurseries.  A hook must never block, start threads or tasks, or do I/O.

Implement hooks with :data:`agentrt.hookimpl`::

    from agentrt import hookimpl

    @hookimpl
    def agentrt_register_dialects(register):
        register("my-dialect", lambda: MyDialect())

Factories are called lazily, so a plugin's ``__init__`` stays thin and imports
its heavy modules inside the factory.

A name is registered once: a second plugin registering the same dialect,
provider, tool or sink name is refused (``duplicate_registration``, naming
both plugins), and a ``@hookimpl`` whose name is not one of the hooks below
(a misspelling) is refused when its plugin is registered (``unknown_hook``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from .bots import BotStore
    from .dialect import Dialect
    from .permissions import PermissionPolicy
    from .provider import ProviderFactory
    from .sinks import SinkRegister
    from .threads import ThreadStore
    from .tools import ToolFactory

__all__ = ["hookspec", "hookimpl", "PROJECT_NAME"]

PROJECT_NAME = "agentrt"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def agentrt_register_dialects(register: Callable[[str, Callable[[], Dialect]], None]) -> None:
    """Register dialects: ``register(name, factory)``; ``factory()`` returns a dialect.

    ``name`` is what ``--protocol`` and ``AWP_AGENT_CLI_PROTOCOL`` select.
    """


@hookspec
def agentrt_register_providers(register: Callable[[str, ProviderFactory], None]) -> None:
    """Register model providers: ``register(name, factory)``; ``factory(env)`` returns a provider."""


@hookspec
def agentrt_register_tools(register: Callable[[str, ToolFactory], None]) -> None:
    """Register agent tools: ``register(name, factory)``; ``factory(env)`` returns a tool or ``None``."""


@hookspec
def agentrt_register_sinks(register: SinkRegister) -> None:
    """Register sinks: ``register(name, factory, role=...)``; ``factory(options)`` returns a sink.

    ``role`` (``"terminal"``, ``"recorder"`` or the default ``"other"``) is how
    the commands choose a sink without knowing its name; see :mod:`agentrt.sinks`.
    """


@hookspec
def agentrt_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``agentrt`` click group ``cli`` (keep imports inside the commands)."""


@hookspec(firstresult=True)
def agentrt_permission_policy() -> PermissionPolicy | None:
    """Return the policy that answers ``can_use_tool`` requests, or ``None`` to pass.

    The first plugin that returns a policy wins; with none, every tool is denied.
    """


@hookspec(firstresult=True)
def agentrt_thread_store(env: Mapping[str, str]) -> ThreadStore | None:
    """Return the thread store (named threads with their native session ids), or ``None``.

    ``agentrt run --thread`` and ``agentrt chat --thread`` use it to resume a
    thread's native session.  The database plugin provides it; the object must
    satisfy :class:`agentrt.threads.ThreadStore`.
    """


@hookspec(firstresult=True)
def agentrt_bot_store(env: Mapping[str, str]) -> BotStore | None:
    """Return the bot store (:class:`agentrt.bots.BotStore`), or ``None``.

    The FastAgent supervisor persists bot state through it; the database plugin provides it.
    """
