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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from ._fdwrite import OUTPUT_CLOSED, FdWriter
from .events import EventBatch

__all__ = ["Sink", "SinkFactory", "BufferPolicy", "FdWriter", "OUTPUT_CLOSED"]

BufferPolicy = Literal["block", "coalesce"]


@runtime_checkable
class Sink(Protocol):
    """What the runtime needs of a sink."""

    #: Human name, shown in diagnostics.
    name: str
    #: How a full buffer is handled (see module docstring).
    policy: BufferPolicy
    #: Batches that may wait in the buffer.
    buffer_size: int

    async def handle(self, batch: EventBatch) -> None:
        """Consume one batch.  May await (that is the backpressure)."""

    async def aclose(self) -> None:
        """Flush and release resources; called once, shielded, with a bound."""


SinkFactory = Callable[[Mapping[str, Any]], Sink]
"""A registered sink factory: options in, sink out."""
