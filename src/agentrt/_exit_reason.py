"""Why an agent died: its exit, and the last lines of its stderr, bounded and with secrets masked.

A turn whose agent exits before the turn's terminal event fails
``exit_before_result`` (:func:`exit_before_result`), its message naming the
exit code or signal (:func:`exit_how`).  An agent that exits so usually said
why on stderr (a missing API key, a bad flag, a stack trace).
:func:`exit_reason` appends the newest lines of it to that message, so
``agentrt run`` and the ``turn_failed`` event carry the agent's own words,
never a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import trio

from .events import TurnFailed
from .masking import mask_text

if TYPE_CHECKING:
    from ._process import AgentProcess, ExitStatus

__all__ = ["TAIL_LINES", "TAIL_BYTES", "exit_before_result", "exit_how", "exit_reason", "mask_text", "stderr_lines"]

#: At most this many of the last stderr lines are shown...
TAIL_LINES = 5
#: ...and at most this many bytes of them.
TAIL_BYTES = 2048
# After the exit, how long the last stderr bytes may take to arrive (a
# grandchild holding stderr open must not delay the turn's end for long).
_STDERR_WAIT = 0.5
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def exit_how(status: ExitStatus) -> str:
    """How the process ended, as the ``exit_before_result`` message says it: ``code=N`` or ``signal=N``."""
    return f"signal={status.signal}" if status.signal is not None else f"code={status.returncode}"


def exit_before_result(status: ExitStatus, message: str | None = None) -> TurnFailed:
    """The failure of a turn whose agent exited before the turn's terminal event.

    ``message`` is the whole message when the caller knows more (the agent's
    last stderr lines, :func:`exit_reason`); by default it names the exit code or signal.
    """
    return TurnFailed(
        code="exit_before_result", message=message or f"the agent exited before its result ({exit_how(status)})"
    )


def stderr_lines(tail: bytes, env: Mapping[str, str] | None = None) -> list[str]:
    """The last non-blank lines of ``tail`` (at most :data:`TAIL_LINES` / :data:`TAIL_BYTES`), masked."""
    # Mask before cutting, so a cut never leaves half a secret showing.
    text = mask_text(tail.decode("utf-8", "replace"), env)
    lines = [_CONTROL_RE.sub("", line).rstrip() for line in text.splitlines()]
    kept: list[str] = []
    size = 0
    for line in reversed([line for line in lines if line.strip()]):
        if len(kept) == TAIL_LINES:
            break
        length = len(line.encode("utf-8", "replace"))
        if size + length > TAIL_BYTES:
            if not kept:  # one huge line: its end is the useful part
                end = line.encode("utf-8", "replace")[-(TAIL_BYTES - 3):].decode("utf-8", "ignore")
                kept.append("..." + end)
            break
        kept.append(line)
        size += length + 1
    return kept[::-1]


async def exit_reason(proc: AgentProcess, how: str) -> str:
    """The ``exit_before_result`` message for ``proc``: its exit (``how``) and its last stderr lines."""
    # Shielded: the turn's end must be reported even while the caller is being cancelled.
    with trio.CancelScope(shield=True, deadline=trio.current_time() + _STDERR_WAIT):
        await proc.wait_stderr_closed()
    message = f"the agent exited before its result ({how})"
    # 4 KiB raw is enough for TAIL_BYTES shown after masking and dropping blank lines.
    lines = stderr_lines(proc.stderr_tail(4 * TAIL_BYTES), proc.env)
    if not lines:
        return message
    return message + "; its stderr ended with:\n" + "\n".join(f"  {line}" for line in lines)
