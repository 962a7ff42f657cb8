"""What the terminal UI shows, as two views over the same turn state.

``RichView`` (a terminal, :mod:`agentrt_tui._richview`): the reply's current text block streams as raw
text in a ``rich.live`` region with one status line under it, and is
re-rendered as Markdown once the block ends (a tool call, another block, the
turn's end).  A tool call gets lines of its own (``● Bash: <the whole
command>``, then ``⎿ <one line of result>``), and text blocks are separated.
While a question is asked on the terminal the live region is stopped
(:meth:`TurnView.pause`), so nothing repaints over it.  ``PlainView`` (a pipe
or a file): the same information as plain lines, never an escape code.  Both strip control characters from
everything the agent sends, so an agent cannot drive the user's terminal.
Views are synchronous; the sink calls them from a worker thread.
"""

from __future__ import annotations

import re
from typing import IO, Protocol

from agentrt.events import (
    Diagnostic,
    Event,
    EventBatch,
    ProcessExited,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)

from ._toolline import call_lines, result_line

__all__ = ["TurnView", "PlainView", "clean", "footer_text", "tool_status"]

# Whole escape sequences first (CSI, OSC, two-byte), so no "[2J" residue is left...
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# ...then C0 controls but tab and newline, DEL, and C1 controls (CSI is 0x9b).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_STATUS_MAX = 100


def clean(text: str) -> str:
    """``text`` without terminal control characters (``\\r`` included: no overwriting)."""
    if "\x1b" in text:
        text = _ESCAPE.sub("", text)
    return _CONTROL.sub("", text)


def _bounded(text: str, limit: int = _STATUS_MAX) -> str:
    text = " ".join(clean(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_status(event: ToolUse) -> str:
    """The one-line, bounded label of a tool call."""
    label = event.summary
    if not label:
        try:
            from agentrt.labels import tool_label

            label = tool_label(event.name, event.input)
        except ImportError:  # pragma: no cover - labels ship with the core
            label = ""
    return _bounded(label or f"Using {event.name}")


def _status_text(event: Status) -> str:
    kind = event.kind.replace("_", " ")
    label = event.label.strip()
    if event.kind == "rate_limit":
        extra = "" if label in ("", "rate_limited") else f": {label}"
        return _bounded(f"rate limited{extra}")
    if " " in label:  # already a sentence ("API error 500, retrying (attempt 1 of 2)")
        return _bounded(label)
    label = label.replace("_", " ")
    if not label:
        return _bounded(kind)
    return _bounded(label if event.kind == "status" else f"{kind}: {label}")


def footer_text(usage: Usage | None, duration: float | None) -> str:
    """``12 in · 2 out · 1.3 s``: what a turn cost (unknown counts are left out)."""
    parts: list[str] = []
    if usage is not None:
        if usage.input_tokens is not None:
            parts.append(f"{usage.input_tokens} in")
        if usage.output_tokens is not None:
            parts.append(f"{usage.output_tokens} out")
        if usage.cache_read_input_tokens:
            parts.append(f"{usage.cache_read_input_tokens} cached")
    if duration is not None:
        parts.append(f"{duration:.1f} s")
    return " · ".join(parts)


class TurnView:
    """The turn state both views share; subclasses draw it."""

    def __init__(self) -> None:
        self.reply: list[str] = []
        self.status = ""
        self.started: float | None = None
        self.in_turn = False
        self._index: int | None = None  # the block index of the last text delta

    def feed(self, batch: EventBatch) -> None:
        """Apply one batch (in order)."""
        for event in batch.events:
            self._event(event, batch.mono)
        self.refresh()

    def _event(self, event: Event, mono: float) -> None:
        if isinstance(event, TurnStarted):
            self.begin(mono)
        elif isinstance(event, TextDelta):
            if not self.in_turn:
                self.begin(mono)
            index = event.index
            if type(index) is int:
                if self._index is not None and index != self._index:
                    self.block_break()  # another block: not glued to the last one
                self._index = index
            text = clean(event.text)
            self.reply.append(text)
            self.status = "" if self.status == "Thinking…" else self.status
            self.text(text)
        elif isinstance(event, ThinkingDelta):
            self.set_status("Thinking…")
        elif isinstance(event, ToolUse):
            self.block_break()
            self._index = None
            self.status = tool_status(event)  # the live line says what runs
            name, lines = call_lines(event)
            self.tool_call(name, lines)
        elif isinstance(event, ToolResult):
            self._index = None
            self.status = ""
            self.tool_result(result_line(event), event.is_error)
        elif isinstance(event, Status):
            self.set_status(_status_text(event))
        elif isinstance(event, Diagnostic):
            self.note(_bounded(f"{event.code}: {event.detail}" if event.detail else event.code, 300))
        elif isinstance(event, (TurnCompleted, TurnFailed)):
            duration = None if self.started is None else max(0.0, mono - self.started)
            self.finish(event, footer_text(event.usage, duration))
            self.reply, self.status, self.started, self.in_turn = [], "", None, False
        elif isinstance(event, ProcessExited) and not event.requested:
            how = f"signal {event.signal}" if event.signal is not None else f"code {event.returncode}"
            self.error(f"the agent exited unexpectedly ({how})")

    def begin(self, mono: float) -> None:
        """A turn starts."""
        self.reply, self.status, self.started, self.in_turn = [], "", mono, True
        self._index = None

    def set_status(self, text: str) -> None:
        """Replace the status line."""
        self.status = text

    # -- drawing, per view ---------------------------------------------------
    def text(self, text: str) -> None:
        """Reply text arrived."""

    def block_break(self) -> None:
        """The current text block ended (a tool call or another block follows)."""

    def tool_call(self, name: str, lines: list[str]) -> None:
        """A tool call: its name and the whole command (escaped lines) or a summary."""

    def tool_result(self, text: str, failed: bool) -> None:
        """A tool's result, in one line."""

    def pause(self) -> None:
        """Stop redrawing (a question is asked on the terminal) until :meth:`resume`."""

    def resume(self) -> None:
        """Redraw again after :meth:`pause`."""

    def refresh(self) -> None:
        """Redraw after a batch."""

    def note(self, text: str) -> None:
        """A diagnostic (dimmed)."""

    def error(self, text: str) -> None:
        """An error in plain words."""

    def finish(self, event: TurnCompleted | TurnFailed, footer: str) -> None:
        """The turn ended."""

    def close(self) -> None:
        """Release the terminal."""


class TextOut(Protocol):
    """What the plain view writes to: a text file, or a buffer the sink drains."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class PlainView(TurnView):
    """Plain text for pipes and files: no escape codes, ever."""

    def __init__(self, file: TextOut, footer_file: IO[str] | None = None) -> None:
        super().__init__()
        self.file = file
        #: Where the usage footer goes (None: with the reply), e.g. stderr so stdout holds only replies.
        self.footer_file = footer_file
        self._at_line_start = True
        self._shown_status = ""

    def _write(self, text: str) -> None:
        if text:
            self.file.write(text)
            self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        if not self._at_line_start:
            self._write("\n")
        self._write(text + "\n")

    def text(self, text: str) -> None:
        self._write(text)

    def block_break(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def tool_call(self, name: str, lines: list[str]) -> None:
        self._line(f"● {name}: {lines[0]}" if lines else f"● {name}")
        for line in lines[1:]:
            self._line(f"  │ {line}")
        self._shown_status = self.status

    def tool_result(self, text: str, failed: bool) -> None:
        self._line(f"  ⎿ {text}")
        self._shown_status = ""

    def set_status(self, text: str) -> None:
        super().set_status(text)
        if text and text != self._shown_status:
            self._line(f"[{text}]")
        self._shown_status = text

    def refresh(self) -> None:
        self.file.flush()

    def note(self, text: str) -> None:
        self._line(f"· {text}")

    def error(self, text: str) -> None:
        self._line(f"error: {text}")

    def finish(self, event: TurnCompleted | TurnFailed, footer: str) -> None:
        if not self.reply and isinstance(event, TurnCompleted) and event.result:
            self._write(clean(event.result))
        if isinstance(event, TurnFailed):
            self.error(_failure(event))
        if footer and self.footer_file is None:
            self._line(f"({footer})")
        elif not self._at_line_start:
            self._write("\n")
        if footer and self.footer_file is not None:
            self.footer_file.write(f"({footer})\n")
            self.footer_file.flush()
        self._shown_status = ""
        self.file.flush()


def _failure(event: TurnFailed) -> str:
    words = {
        "turn_cancelled": "the turn was cancelled",
        "runtime_output_oversize": "the agent printed a line over 4 MiB and was stopped",
        "cc_session_exit_before_done": "the agent exited before finishing the turn",
    }
    message = words.get(event.code) or clean(event.message) or "the turn failed"
    return f"{_bounded(message, 300)} [{event.code}]"
