"""``--sink NAME``, the sink option ``run``, ``chat`` and ``web`` share.

A named sink that holds a role (``terminal``, ``recorder``) becomes the one the
command uses for that role, whatever else holds it; a sink without a role
(``other``) is added to every conversation the command opens.  click is
imported only when the option is built, so importing :mod:`agentrt.sinks`
stays cheap for embedders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import AgentrtError

if TYPE_CHECKING:
    from ._plugins import Plugins
    from .sinks import Sink

__all__ = ["sink_options", "apply_sink_choice", "open_added_sinks"]

F = TypeVar("F", bound=Callable[..., Any])


def sink_options(func: F) -> F:
    """Add ``--sink NAME`` (repeatable; the values arrive as ``sinks``, a tuple) to a click command."""
    import click

    option = click.option(
        "--sink", "sinks", multiple=True, metavar="NAME",
        help="Use the registered sink NAME: for its role (terminal, recorder) if it has one, else as an "
             "extra sink of each conversation (repeatable; agentrt plugins lists sinks).",
    )
    return option(func)


def apply_sink_choice(plugins: Plugins, names: Sequence[str]) -> tuple[str, ...]:
    """Apply ``--sink`` ``names`` to ``plugins``; returns the names of the role-less sinks to add.

    A sink with a role is chosen for it (:meth:`~agentrt.Plugins.choose_sinks`).
    Errors: ``unknown_sink`` (no loaded sink has the name), ``conflicting_sink_choice``
    (two names for one role), and ``duplicate_registration`` from the registry.
    """
    registrations = plugins.sink_registrations()
    chosen: dict[str, str] = {}
    added: list[str] = []
    for name in names:
        reg = registrations.get(name)
        if reg is None:
            known = ", ".join(sorted(registrations)) or "none loaded"
            raise AgentrtError("unknown_sink", f"--sink {name!r}: no loaded sink has that name (sinks: {known})")
        if reg.role == "other":
            if name not in added:
                added.append(name)
        elif chosen.setdefault(reg.role, name) != name:
            raise AgentrtError(
                "conflicting_sink_choice",
                f"--sink {chosen[reg.role]!r} and --sink {name!r} both have the role {reg.role!r}; give one",
            )
    plugins.choose_sinks(chosen)
    return tuple(added)


def open_added_sinks(plugins: Plugins, names: Sequence[str], options: Mapping[str, Any]) -> list[Sink]:
    """One sink per name in ``names`` (from :func:`apply_sink_choice`), each made with its own copy of ``options``."""
    factories = plugins.sinks()
    return [factories[name](dict(options)) for name in names]
