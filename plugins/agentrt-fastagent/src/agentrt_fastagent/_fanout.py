"""Fan-out of event batches to sinks: one task and one bounded buffer per sink.

Lifecycle traffic is light (a handful of events per bot start), so both
buffer policies wait when a buffer is full; a sink that raises is reported on
stderr and detached, and the supervisor goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import attrs
import trio

from agentrt.events import EventBatch
from agentrt.sinks import Sink

__all__ = ["Fanout"]

_CLOSE_WAIT = 5.0


@attrs.define
class _Attached:
    sink: Sink
    send: trio.MemorySendChannel[EventBatch]
    receive: trio.MemoryReceiveChannel[EventBatch]
    failed: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)


class Fanout:
    """Deliver batches to every attached sink in order, each in its own task."""

    def __init__(self, nursery: trio.Nursery, sinks: Sequence[Sink]) -> None:
        self._attached: list[_Attached] = []
        for sink in sinks:
            send, receive = trio.open_memory_channel[EventBatch](max(1, int(sink.buffer_size)))
            att = _Attached(sink=sink, send=send, receive=receive)
            self._attached.append(att)
            nursery.start_soon(self._pump, att)

    async def _pump(self, att: _Attached) -> None:
        try:
            async with att.receive:
                async for batch in att.receive:
                    if att.failed:
                        continue
                    try:
                        await att.sink.handle(batch)
                    except Exception as exc:  # a broken sink must not stop the bots
                        att.failed = True
                        print(
                            f"agentrt: sink {att.sink.name!r} failed and was detached: {type(exc).__name__}: {exc}",
                            file=sys.stderr,
                        )
        finally:
            att.done.set()

    async def send(self, batch: EventBatch) -> None:
        """Hand ``batch`` to every live sink (waits while a buffer is full)."""
        for att in self._attached:
            if not att.failed:
                try:
                    await att.send.send(batch)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    att.failed = True

    async def aclose(self) -> None:
        """Let every sink drain its buffer, then close it (shielded, bounded)."""
        with trio.CancelScope(shield=True):
            for att in self._attached:
                await att.send.aclose()
            with trio.move_on_after(_CLOSE_WAIT):
                for att in self._attached:
                    await att.done.wait()
            for att in self._attached:
                with trio.move_on_after(_CLOSE_WAIT):
                    try:
                        await att.sink.aclose()
                    except Exception as exc:
                        print(f"agentrt: sink {att.sink.name!r} failed to close: {exc}", file=sys.stderr)
