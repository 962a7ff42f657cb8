"""The terminal view: a live region for the current text block and the status line (see :mod:`._view`)."""

from __future__ import annotations

from typing import IO, Any

from agentrt.events import TurnCompleted, TurnFailed

from ._view import TurnView, _failure, clean

__all__ = ["RichView"]


class RichView(TurnView):
    """A live region for the current text block and the status line; Markdown once a block is done."""

    def __init__(self, file: IO[str], *, force_terminal: bool | None = None, width: int | None = None) -> None:
        super().__init__()
        from rich.console import Console

        self.console = Console(file=file, force_terminal=force_terminal, width=width,
                               highlight=False, markup=False, emoji=False)
        self._live: Any = None
        self._block: list[str] = []  # the text block the live region shows
        self._paused = False

    def _renderable(self, *, status: bool = True) -> Any:
        from rich.console import Group
        from rich.text import Text

        parts: list[Any] = [Text("".join(self._block))] if self._block else []
        if status and self.status:
            parts.append(Text(f"⋯ {self.status}", style="cyan"))
        return Group(*parts)

    def begin(self, mono: float) -> None:
        super().begin(mono)
        self._stop()
        self._block = []
        if not self._paused:
            self._start()

    def _start(self) -> None:
        from rich.live import Live

        self._live = Live(self._renderable(), console=self.console, refresh_per_second=12,
                          transient=False, vertical_overflow="visible", auto_refresh=True)
        self._live.start()

    def text(self, text: str) -> None:
        self._block.append(text)

    def _print(self, renderable: Any) -> None:
        # Above the live region (rich moves it down), which first forgets what is printed here.
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)
        self.console.print(renderable)

    def block_break(self) -> None:
        from rich.markdown import Markdown

        text = "".join(self._block)
        self._block = []
        if text.strip():
            self._print(Markdown(text))

    def tool_call(self, name: str, lines: list[str]) -> None:
        from rich.text import Text

        line = Text()
        line.append("● ", style="cyan")
        line.append(name, style="bold")
        if lines:
            line.append(f": {lines[0]}")
        for more in lines[1:]:
            line.append(f"\n  │ {more}")
        self._print(line)

    def tool_result(self, text: str, failed: bool) -> None:
        from rich.text import Text

        self._print(Text(f"  ⎿ {text}", style="red" if failed else "dim"))

    def pause(self) -> None:
        # What the region shows stays on the screen as it is; nothing redraws under the question.
        self._paused = True
        if self._live is not None:
            self._live.update(self._renderable(status=False), refresh=True)
            self._stop()
            self._block = []

    def resume(self) -> None:
        self._paused = False
        if self.in_turn and self._live is None:
            self._start()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable())

    def note(self, text: str) -> None:
        from rich.text import Text

        self._print(Text(text, style="dim"))

    def error(self, text: str) -> None:
        from rich.text import Text

        self._print(Text(text, style="bold red"))

    def finish(self, event: TurnCompleted | TurnFailed, footer: str) -> None:
        from rich.markdown import Markdown
        from rich.text import Text

        block = "".join(self._block)
        if not self.reply and isinstance(event, TurnCompleted) and event.result:
            block = clean(event.result)
        self._block = []
        final: Any = Markdown(block) if isinstance(event, TurnCompleted) and block.strip() else Text(block)
        if self._live is not None:
            self._live.update(final, refresh=True)
            self._stop()
        elif block:
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
