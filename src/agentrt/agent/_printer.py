"""How ``agentrt agent`` prints: events through the dialect, one write per batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from .._framing import encode_line
from ..dialect import AgentCodec
from ..events import Event, TextDelta, ToolUse, TurnCompleted, TurnFailed
from ..provider import ToolCall
from ._io import ByteSink

__all__ = ["Printer"]


class Printer:
    """Encodes events through the dialect and writes them, one write per batch.

    A batch is what one event produces (the first delta of a block comes with
    the dialect's block-start line, in the same write).  A write is shielded
    from the turn's cancellation, so an interrupt can never leave half a line
    on stdout; only :meth:`abort` (SIGTERM) cuts a write short.  The sink's
    lock keeps batches whole when the input reader prints a control response.
    """

    def __init__(self, codec: AgentCodec, sink: ByteSink) -> None:
        self._codec = codec
        self._sink = sink
        self._pending: list[bytes] = []
        self._writing: trio.CancelScope | None = None
        #: Whether :meth:`abort` was called.
        self.aborted = False
        #: The text printed in the current turn (what an interrupt keeps).
        self.turn_text: list[str] = []
        #: Whether the current turn's result is printed (or being written).
        self.turn_ended = False

    def start_turn(self) -> None:
        """A new turn begins: forget the last one's text and result."""
        self.turn_text = []
        self.turn_ended = False

    def abort(self) -> None:
        """End the write in progress, and refuse later ones (the process is stopping)."""
        self.aborted = True
        if self._writing is not None:
            self._writing.cancel()

    async def _write(self, data: bytes) -> None:
        if self.aborted:
            raise trio.BrokenResourceError("the agent is stopping")
        with trio.CancelScope(shield=True) as scope:
            self._writing = scope
            try:
                await self._sink.send_all(data)
            finally:
                self._writing = None
        if scope.cancelled_caught:
            raise trio.BrokenResourceError("the agent is stopping")

    def _add(self, event: Event) -> None:
        if isinstance(event, (TurnCompleted, TurnFailed)):
            self.turn_ended = True
        for obj in self._codec.encode(event):
            self._pending.append(encode_line(obj))

    async def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            await self._write(data)

    async def drain(self) -> None:
        """Write what the dialect owes the host outside any event (stream-json control responses)."""
        lines = [encode_line(obj) for obj in self._codec.drain_output()]
        if lines:
            await self._write(b"".join(lines))

    async def emit(self, *events: Event) -> None:
        for event in events:
            self._add(event)
        await self.flush()

    # -- TurnOutput ------------------------------------------------------
    async def text(self, text: str) -> None:
        self.turn_text.append(text)
        self._add(TextDelta(text=text, index=0))
        await self.flush()

    async def tool_uses(self, calls: Sequence[tuple[ToolCall, Any]]) -> None:
        for call, arguments in calls:
            self._add(ToolUse(id=call.id, name=call.name, input=arguments if isinstance(arguments, dict) else {}))
        await self.flush()

    async def failed(self, code: str, message: str = "") -> None:
        await self.emit(TurnFailed(code=code, message=message))
