"""The ``tui`` sink: the terminal UI, drawn off the trio thread."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import IO, Any, Literal

import trio

from agentrt.errors import AgentrtError
from agentrt.events import ControlRequest, EventBatch, TurnCompleted, TurnFailed
from agentrt.sinks import OUTPUT_CLOSED, FdWriter

from ._richview import RichView
from ._view import PlainView, TurnView

__all__ = ["TuiSink", "make_sink"]

# How long a pause waits for the sink to draw what led to the question (the tool call) first.
_CATCH_UP = 1.0
# Drawn control requests remembered (their ids), so a pause can wait for its own.
_REQUESTS_KEPT = 64


class TuiSink:
    """Streams replies, tool progress, status, diagnostics and errors to a terminal.

    On a terminal it uses rich; anywhere else (a pipe, a file) plain text with
    no escape codes.  On a terminal, drawing happens in a worker thread so a
    slow terminal never stalls the trio thread.  Plain text to a file
    descriptor (a pipe, a file) is rendered in the trio thread and written by
    an :class:`~agentrt.sinks.FdWriter`, without a thread round trip per batch;
    when that output's reader goes away, drawing stops (``output_closed``) and
    later batches are dropped.  The ``coalesce`` policy lets the runtime merge
    deltas when the UI falls behind.  Off a terminal, ``footer_file`` (e.g.
    stderr) takes the usage footers, so the output holds only the replies.
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
        footer_file: IO[str] | None = None,
    ) -> None:
        self.file: IO[str] = file if file is not None else sys.stdout
        if terminal is None:
            isatty = getattr(self.file, "isatty", None)
            terminal = bool(isatty()) if callable(isatty) else False
        self.terminal = terminal
        self.buffer_size = buffer_size
        #: Plain text rendered here, then written to ``file``'s descriptor (None: drawn in a thread).
        self._plain: _Pending | None = None
        self._writer: FdWriter | None = None
        if not terminal:
            fd = _fileno(self.file)
            if fd is not None:
                self._plain = _Pending()
                self._writer = FdWriter(fd)
        self.view: TurnView = (
            RichView(self.file, force_terminal=True, width=width)
            if terminal
            else PlainView(self._plain if self._plain is not None else self.file, footer_file=footer_file)
        )
        #: Set when the output's reader went away (EPIPE): nothing more is drawn.
        self.output_closed = False
        self._closed = False
        self._lock = trio.Lock()
        #: Turns whose end has been drawn.
        self.turns_drawn = 0
        self._drawn = trio.Event()
        self._requests_drawn: list[str] = []

    async def handle(self, batch: EventBatch) -> None:
        """Draw one batch."""
        async with self._lock:
            if self._closed:
                return
            if self._plain is not None:
                self.view.feed(batch)
                await self._write_plain()
            else:
                await trio.to_thread.run_sync(self.view.feed, batch)
            ended = 0
            for ev in batch.events:
                kind = type(ev)
                if kind is TurnCompleted or kind is TurnFailed:
                    ended += 1
                elif isinstance(ev, ControlRequest):
                    self._requests_drawn = [*self._requests_drawn[-_REQUESTS_KEPT + 1 :], ev.request_id]
                    self._drawn.set()
                    self._drawn = trio.Event()
            if ended:
                self.turns_drawn += ended
                self._drawn.set()
                self._drawn = trio.Event()

    async def _write_plain(self) -> None:
        assert self._plain is not None and self._writer is not None
        text = self._plain.take()
        if not text or self.output_closed:
            return
        encoding = getattr(self.file, "encoding", None) or "utf-8"
        errors = getattr(self.file, "errors", None) or "strict"
        try:
            # Whatever the caller printed through ``file`` itself goes first.
            self.file.flush()
            await self._writer.write(text.encode(encoding, errors))
        except (AgentrtError, BrokenPipeError) as exc:
            if isinstance(exc, AgentrtError) and exc.code != OUTPUT_CLOSED:
                raise
            self.output_closed = self._closed = True
            self._drawn.set()

    @asynccontextmanager
    async def paused(self, after_request: str | None = None) -> AsyncIterator[None]:
        """Draw nothing inside the block (a question is being asked on this terminal); resume after it.

        The live region is stopped with what it showed left on the screen, so
        nothing repaints over the question.  Batches that arrive meanwhile wait
        (the ``coalesce`` policy merges them).  With ``after_request`` (a
        control request's id) it first lets the sink draw up to that request,
        for at most a second, so the tool call asked about is on the screen
        above the question.
        """
        if after_request is not None:
            with trio.move_on_after(_CATCH_UP):
                while after_request not in self._requests_drawn and not self._closed:
                    await self._drawn.wait()
        async with self._lock:
            if self._closed or not self.terminal:
                yield  # plain lines never repaint anything
                return
            await trio.to_thread.run_sync(self.view.pause)
            try:
                yield
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self.view.resume)

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


class _Pending:
    """A text file the plain view writes into; the sink takes the text after each batch."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        """Nothing to do: the sink writes what was collected."""

    def take(self) -> str:
        text = "".join(self._parts)
        self._parts.clear()
        return text


def _fileno(file: IO[str]) -> int | None:
    try:
        fd = file.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def make_sink(options: Mapping[str, Any]) -> TuiSink:
    """The ``tui`` sink factory: options ``file``, ``terminal`` (force rich or plain), ``width``."""
    return TuiSink(options.get("file"), terminal=options.get("terminal"), width=options.get("width"))
