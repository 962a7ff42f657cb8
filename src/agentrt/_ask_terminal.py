"""``agentrt chat`` and ``agentrt run`` ask before a tool runs: ``Allow <tool>? [y/n/a]`` on the terminal.

During a turn the terminal is in cooked mode and nothing else reads stdin, so
the answer is one line read from file descriptor 0 once trio reports it
readable: cancellable at any moment, with no thread left blocked on the
terminal.  ``y`` allows once, ``n`` denies, ``a`` allows this tool (with the
same argument) for the rest of the chat.  The policy bounds the wait.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import trio

from ._approval import Answer, ApprovalPrompt

__all__ = ["TerminalAsker", "AskCancelled"]

_ANSWERS: dict[str, Answer] = {"y": "allow", "yes": "allow", "n": "deny", "no": "deny", "a": "always",
                               "always": "always"}


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
                    self._show(f"Allow {prompt.label}? [y/n/a] (y once, n deny, a always for this thread; "
                               f"denied in {prompt.timeout:g}s)")
                    while True:
                        await trio.lowlevel.wait_readable(self._fd)
                        data = os.read(self._fd, 4096)
                        if not data:
                            return "deny"
                        answer = _ANSWERS.get(data.decode("utf-8", "replace").strip().lower())
                        if answer is not None:
                            return answer
                        self._show("answer y (allow once), n (deny) or a (always for this thread)")
            finally:
                self._scopes.discard(scope)
        raise AskCancelled("the turn ended before the question was answered")

    def cancel_pending(self) -> None:
        """Drop every unanswered question (they deny): the prompt is about to read the terminal again."""
        for scope in list(self._scopes):
            scope.cancel()
