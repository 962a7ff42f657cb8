"""``agentrt chat`` and ``agentrt run`` ask before a tool runs: ``Allow <tool>? [y/n/a]`` on the terminal.

The question shows the tool's whole input, escaped (:mod:`agentrt.display`)
and wrapped to the terminal's width, every line of it behind a ``│`` gutter so
that nothing in the input can pass for the question's own lines; its last line
says what each answer does, and what "always" covers.

During a turn the terminal is in cooked mode and nothing else reads stdin, so
the answer is one line read from file descriptor 0 once trio reports it
readable: cancellable at any moment, with no thread left blocked on the
terminal.  ``y`` allows once, ``n`` denies, ``a`` allows this tool (with the
same argument) for the rest of the chat.  The policy bounds the wait.
"""

from __future__ import annotations

import os
import shutil
import termios
from collections.abc import Callable

import trio

from ._approval import Answer, ApprovalPrompt
from ._approval_show import plain_name
from .display import escape_text, wrap_lines

__all__ = ["TerminalAsker", "AskCancelled", "question"]

_ANSWERS: dict[str, Answer] = {"y": "allow", "yes": "allow", "n": "deny", "no": "deny", "a": "always",
                               "always": "always"}


_GUTTER = "  │ "


def question(prompt: ApprovalPrompt, width: int, height: int = 0) -> str:
    """The question's text, lines at most ``width`` columns wide (where the input allows a cut).

    A tool whose name is not plain is asked about as ``this tool``, its name
    on the input's first line (``tool: …``).  When the question is taller than
    ``height`` rows, the last line says so: the start of the input has
    scrolled away, and an attacker would put the damage there.
    """
    inner = max(width - len(_GUTTER), 20)
    plain = plain_name(prompt.tool_name)
    lines = [f"Allow {prompt.tool_name if plain else 'this tool'}? [y/n/a]"]
    body = prompt.lines(inner) if prompt.fields else wrap_lines(prompt.label, inner)
    lines += [_GUTTER + line for line in body]
    if height and len(lines) + 1 > height:
        lines.append(f"  ↑ the input is {len(body)} lines: scroll up to its first line and read it all before "
                     "answering")
    always = f": {escape_text(prompt.always)}" if prompt.always else ""
    lines.append(f"  y once · n deny · a always{always}, for the rest of this chat · denied in {prompt.timeout:g}s")
    return "\n".join(lines)


def _drop_typeahead(fd: int) -> None:
    """Discard what was typed before the question was shown: it was not typed as an answer to it."""
    try:
        termios.tcflush(fd, termios.TCIFLUSH)
    except (termios.error, OSError):
        pass  # not a terminal: nothing was typed ahead


class AskCancelled(Exception):
    """The turn ended (or was cancelled) before the question was answered."""


class TerminalAsker:
    """Asks on the terminal, one question at a time; :meth:`cancel_pending` drops unanswered ones."""

    def __init__(self, show: Callable[[str], None], fd: int = 0) -> None:
        self._show = show
        self._fd = fd
        self._lock = trio.Lock()
        self._scopes: set[trio.CancelScope] = set()

    async def __call__(self, prompt: ApprovalPrompt) -> Answer:
        """Show the question and read answers until one is valid (EOF denies)."""
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                async with self._lock:
                    size = shutil.get_terminal_size((80, 24))
                    _drop_typeahead(self._fd)
                    self._show(question(prompt, size.columns, size.lines))
                    while True:
                        await trio.lowlevel.wait_readable(self._fd)
                        data = os.read(self._fd, 4096)
                        if not data:
                            return "deny"
                        answer = _ANSWERS.get(data.decode("utf-8", "replace").strip().lower())
                        if answer is not None:
                            return answer
                        self._show("answer y (allow once), n (deny) or a (always, as said above)")
            finally:
                self._scopes.discard(scope)
        raise AskCancelled("the turn ended before the question was answered")

    def cancel_pending(self) -> None:
        """Drop every unanswered question (they deny): the prompt is about to read the terminal again."""
        for scope in list(self._scopes):
            scope.cancel()
