"""What the terminal UI shows, as two views over the same turn state.

``RichView`` (a terminal): the reply streams as raw text in a ``rich.live``
region with one status line under it, and is re-rendered as Markdown when the
turn completes.  ``PlainView`` (a pipe or a file): the same information as
plain lines, never an escape code.  Both strip control characters from
everything the agent sends, so an agent cannot drive the user's terminal.
Views are synchronous; the sink calls them from a worker thread.
"""

from __future__ import annotations

import re
from typing import IO, Any, Protocol

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

__all__ = ["TurnView", "RichView", "PlainView", "clean", "footer_text", "tool_status"]

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
            text = clean(event.text)
            self.reply.append(text)
            self.status = "" if self.status == "Thinking…" else self.status
            self.text(text)
        elif isinstance(event, ThinkingDelta):
            self.set_status("Thinking…")
        elif isinstance(event, ToolUse):
            self.set_status(tool_status(event))
        elif isinstance(event, ToolResult):
            self.set_status("Tool failed" if event.is_error else "")
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

    def set_status(self, text: str) -> None:
        """Replace the status line."""
        self.status = text

    # -- drawing, per view ---------------------------------------------------
    def text(self, text: str) -> None:
        """Reply text arrived."""

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


class RichView(TurnView):
    """A live region for the reply and the status line; Markdown once the turn is done."""

    def __init__(self, file: IO[str], *, force_terminal: bool | None = None, width: int | None = None) -> None:
        super().__init__()
        from rich.console import Console

        self.console = Console(file=file, force_terminal=force_terminal, width=width,
                               highlight=False, markup=False, emoji=False)
        self._live: Any = None

    def _renderable(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        parts: list[Any] = [Text("".join(self.reply))]
        if self.status:
            parts.append(Text(f"⋯ {self.status}", style="cyan"))
        return Group(*parts)

    def begin(self, mono: float) -> None:
        super().begin(mono)
        self._stop()
        from rich.live import Live

        self._live = Live(self._renderable(), console=self.console, refresh_per_second=12,
                          transient=False, vertical_overflow="visible", auto_refresh=True)
        self._live.start()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable())

    def note(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text, style="dim"))

    def error(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text, style="bold red"))

    def finish(self, event: TurnCompleted | TurnFailed, footer: str) -> None:
        from rich.markdown import Markdown
        from rich.text import Text

        reply = "".join(self.reply)
        if not reply and isinstance(event, TurnCompleted) and event.result:
            reply = clean(event.result)
        final: Any = Markdown(reply) if isinstance(event, TurnCompleted) and reply else Text(reply)
        if self._live is not None:
            self._live.update(final, refresh=True)
            self._stop()
        elif reply:
            self.console.print(final)
        if isinstance(event, TurnFailed):
            self.error(_failure(event))
        if footer:
            self.console.print(Text(footer, style="dim"))

    def _stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def close(self) -> None:
        self._stop()
