"""What ``agentrt run`` writes to stdout: the reply as plain text, or one JSON event per line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = ["STDOUT_PIPE_SIZE", "_StdoutSink"]

# The size stdout's pipe grows to once output fills it (see FdWriter's pipe_size): on the
# 100k-line bench session, --json cost about a quarter less CPU with 256 KiB than with 64 KiB,
# and 4% less again with 1 MiB (Linux's default pipe-max-size; a smaller limit keeps the pipe
# as it is): a batch's lines (up to ~0.7 MB) go in one write instead of waiting for the reader.
STDOUT_PIPE_SIZE = 1024 * 1024


class _StdoutSink:
    """Writes the reply to stdout: plain text, or one JSON event per line.

    Each batch is rendered to bytes and written from the trio thread by an
    :class:`~agentrt.sinks.FdWriter` (a non-blocking write and trio's wait on a
    pipe), so a slow reader never blocks the trio thread and no batch pays a
    worker-thread round trip.  When the reader goes away (EPIPE) nothing more
    is written and ``on_closed`` is called once.
    """

    name = "stdout"
    policy: Literal["block"] = "block"
    # Batches waiting for a slow reader are whole decoded batches (up to a
    # 256 KiB read's worth each, with bulk reads): a short buffer makes the
    # agent's output wait in its pipe instead.  Measured on the 100k-line
    # session: with 256, --json peaked at up to 97 MiB; with 16, plain `run`
    # at 52 MiB; with 2, 44.5 MiB, and no more CPU.
    buffer_size = 2

    def __init__(self, as_json: bool, fd: int = 1) -> None:
        from .sinks import FdWriter

        self.as_json = as_json
        self.wrote_text = False
        # Where the plain text stands: the last delta's block index, whether a tool call
        # came since (the next text is another block), whether a newline ended it.
        self._index: Any = None
        self._break = False
        self._at_line_start = True
        # Bulk output (--json writes about 2.8x the agent's text) fills a 64 KiB pipe
        # several times per batch: the first time it does, the pipe grows.
        self.writer = FdWriter(fd, pipe_size=STDOUT_PIPE_SIZE)
        #: Set when stdout's reader went away; nothing is written after it.
        self.output_closed = False
        self.on_closed: Callable[[], None] | None = None

    async def handle(self, batch: Any) -> None:
        from ._eventjson import lines_parts
        from .events import TextDelta

        if self.output_closed:
            return
        if self.as_json:
            # Each event's line as event_line writes it (tests/core/test_json_lines.py), a
            # tool payload written through from its own buffer: this join is its only copy.
            data = b"".join(lines_parts(batch.events))
        else:
            events = batch.events
            texts = [ev.text for ev in events if type(ev) is TextDelta]
            if len(texts) != len(events) or self._break or not events[0].index == events[-1].index == self._index:
                texts = self._blocks(events)  # not one block's deltas alone: separate the blocks
            if not texts:
                return
            self.wrote_text = True
            self._at_line_start = texts[-1].endswith("\n")
            data = "".join(texts).encode("utf-8", "replace")
        await self._write(data)

    def _blocks(self, events: Any) -> list[str]:
        """The text of ``events``, a newline between two text blocks (a tool call, another block index)."""
        from .events import TextDelta, ToolResult, ToolUse

        out: list[str] = []
        for ev in events:
            kind = type(ev)
            if kind is TextDelta:
                index = ev.index
                ended = self._break or (type(index) is int and self._index is not None and index != self._index)
                if ended and not self._ends_line(out):
                    out.append("\n")
                self._break = False
                self._index = index if type(index) is int else self._index
                out.append(ev.text)
            elif kind is ToolUse or kind is ToolResult:
                self._break, self._index = True, None
        return out

    def _ends_line(self, out: list[str]) -> bool:
        # Nothing written yet counts as a line start: no newline before the first text.
        if out:
            return out[-1].endswith("\n")
        return self._at_line_start or not self.wrote_text

    async def _write(self, data: bytes) -> None:
        from .errors import AgentrtError
        from .sinks import OUTPUT_CLOSED

        try:
            await self.writer.write(data)
        except AgentrtError as exc:
            if exc.code != OUTPUT_CLOSED:
                raise
            self.output_closed = True
            if self.on_closed is not None:
                self.on_closed()

    async def aclose(self) -> None:
        if not self.as_json and self.wrote_text and not self.output_closed:
            await self._write(b"\n")
