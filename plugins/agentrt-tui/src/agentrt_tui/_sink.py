"""The ``tui`` sink: the terminal UI, drawn off the trio thread."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import IO, Any, Literal

import trio

from agentrt.events import EventBatch, TurnCompleted, TurnFailed

from ._view import PlainView, RichView, TurnView

__all__ = ["TuiSink", "make_sink"]


class TuiSink:
    """Streams replies, tool progress, status, diagnostics and errors to a terminal.

    On a terminal it uses rich; anywhere else (a pipe, a file) plain text with
    no escape codes.  Drawing happens in a worker thread so a slow terminal
    never stalls the trio thread; the ``coalesce`` policy lets the runtime merge
    deltas when the UI falls behind.
    """

    name = "tui"
    policy: Literal["coalesce"] = "coalesce"

    def __init__(
        self,
        file: IO[str] | None = None,
        *,
        terminal: bool | None = None,
        width: int | None = None,
        buffer_size: int = 256,
    ) -> None:
        self.file: IO[str] = file if file is not None else sys.stdout
        if terminal is None:
            isatty = getattr(self.file, "isatty", None)
            terminal = bool(isatty()) if callable(isatty) else False
        self.terminal = terminal
        self.buffer_size = buffer_size
        self.view: TurnView = (
            RichView(self.file, force_terminal=True, width=width) if terminal else PlainView(self.file)
        )
        self._closed = False
        self._lock = trio.Lock()
        #: Turns whose end has been drawn.
        self.turns_drawn = 0
        self._drawn = trio.Event()

    async def handle(self, batch: EventBatch) -> None:
        """Draw one batch."""
        async with self._lock:
            if self._closed:
                return
            await trio.to_thread.run_sync(self.view.feed, batch)
            ended = sum(1 for ev in batch.events if isinstance(ev, (TurnCompleted, TurnFailed)))
            if ended:
                self.turns_drawn += ended
                self._drawn.set()
                self._drawn = trio.Event()

    async def wait_turns(self, count: int) -> None:
        """Wait until the end of ``count`` turns has been drawn (callers bound the wait)."""
        while self.turns_drawn < count and not self._closed:
            await self._drawn.wait()

    async def aclose(self) -> None:
        """Stop the live region (idempotent)."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            with trio.move_on_after(5):
                await trio.to_thread.run_sync(self.view.close, abandon_on_cancel=True)


def make_sink(options: Mapping[str, Any]) -> TuiSink:
    """The ``tui`` sink factory: options ``file``, ``terminal`` (force rich or plain), ``width``."""
    return TuiSink(options.get("file"), terminal=options.get("terminal"), width=options.get("width"))
