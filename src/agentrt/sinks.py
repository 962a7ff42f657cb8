"""Sinks: where normalized events go (terminal UI, web UI, database...).

A sink receives :class:`~agentrt.events.EventBatch` objects in order.  Each
attached sink runs in its own task behind its own bounded buffer, so a slow
sink never slows the agent's stdout pump beyond its buffer policy:

* ``"block"``: never drop; when the buffer is full the conversation waits
  (backpressure).  The database sink uses this.
* ``"coalesce"``: when full, the conversation merges pending batches into one
  (text deltas concatenated) instead of waiting.  UIs use this.

A sink that writes to stdout or another pipe can use :class:`FdWriter`: it
writes from the trio thread without blocking it and without a worker-thread
round trip per batch.

A sink that raises on a batch is reported (a ``diagnostic`` event
``sink_failed`` and a line on stderr) and still receives later batches; after
three failures in a row it is detached (``sink_detached``).  The conversation
goes on either way.

A sink is registered with a *role*, which is how the commands pick one without
knowing plugin names:

* ``"terminal"``: renders the reply on a terminal (``agentrt run`` uses it
  when stdout is a tty); options ``file``, ``terminal``, ``width``;
* ``"recorder"``: persists every event (``--thread`` runs, chat, bots, the web
  UI use it); options ``env``, ``thread``, ``dialect``, ``executable``, ``model``;
* ``"other"`` (the default): only attached when asked for by name.

When several loaded sinks hold the ``terminal`` or ``recorder`` role, the
user picks one (``--sink NAME``, or ``[sinks] recorder = "NAME"`` in the
config file); without a choice a command that needs the role stops with
``ambiguous_sink_role``.  :func:`sink_options` adds ``--sink`` to a command,
:func:`apply_sink_choice` applies it and :func:`open_added_sinks` makes the
role-less sinks it names.  A
``terminal`` sink that redraws (a live status line) should be a
:class:`PausableSink`: ``agentrt run`` and ``chat`` pause it while they ask a
question on the same terminal, so the question stays visible until answered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, runtime_checkable

from ._cli_sinks import apply_sink_choice, open_added_sinks, sink_options
from ._os.fdwrite import OUTPUT_CLOSED, FdWriter
from .events import EventBatch

__all__ = [
    "Sink", "PausableSink", "FlushableSink", "SinkFactory", "SinkRegister",
    "SinkRole", "SINK_ROLES", "BufferPolicy", "FdWriter",
    "OUTPUT_CLOSED", "sink_options", "apply_sink_choice", "open_added_sinks",
]

BufferPolicy = Literal["block", "coalesce"]
SinkRole = Literal["terminal", "recorder", "other"]
SINK_ROLES: tuple[SinkRole, ...] = ("terminal", "recorder", "other")
"""Every sink role (see the module docstring)."""


@runtime_checkable
class Sink(Protocol):
    """What the runtime needs of a sink."""

    # Read-only properties (the runtime never assigns them), so that a sink
    # may declare a narrower type, e.g. ``policy: Literal["block"]``.
    @property
    def name(self) -> str:
        """Human name, shown in diagnostics."""

    @property
    def policy(self) -> BufferPolicy:
        """How a full buffer is handled (see module docstring)."""

    @property
    def buffer_size(self) -> int:
        """Batches that may wait in the buffer."""

    async def handle(self, batch: EventBatch) -> None:
        """Consume one batch.  May await (that is the backpressure)."""

    async def aclose(self) -> None:
        """Flush and release resources; called once, shielded, with a bound."""


SinkFactory = Callable[[Mapping[str, Any]], Sink]
"""A registered sink factory: options in, sink out."""


@runtime_checkable
class PausableSink(Protocol):
    """A sink that can hold its drawing while something else uses the terminal (a declared capability).

    ``async with sink.paused(request_id):`` nothing is drawn inside the block
    (batches that arrive meanwhile wait, or coalesce), and what was on the
    screen stays as it was; drawing resumes when the block is left.  Given the
    id of the control request being asked about, the sink first draws up to
    it (briefly bounded), so what the question is about is on the screen.
    """

    def paused(self, after_request: str | None = None) -> AbstractAsyncContextManager[None]:
        """A context in which the sink draws nothing."""
        ...


@runtime_checkable
class FlushableSink(Protocol):
    """A sink that can wait until what it was handed so far is stored (a capability checked with ``isinstance``).

    The web UI awaits ``flush()`` (bounded) before it draws a thread from the
    database, so the page shows the turn that just ended.  The database sink is one.
    """

    async def flush(self) -> None:
        """Return when every batch handed to the sink so far is stored."""
        ...


class SinkRegister(Protocol):
    """The ``register`` callable :func:`~agentrt.hookspecs.agentrt_register_sinks` receives."""

    def __call__(self, name: str, factory: SinkFactory, *, role: SinkRole = "other") -> None:
        """Register ``factory`` as the sink called ``name``, in ``role`` (see the module docstring)."""
