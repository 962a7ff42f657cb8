"""Ending a turn before its result: one place for every way a turn is cut short.

``Conversation.cancel_turn()``, closing a :class:`~agentrt.TurnStream` that has
not ended (or the next ``send`` after one was abandoned), ``agentrt run``'s
Ctrl-C, SIGTERM and ``--timeout``, and chat's Ctrl-C all come here, so every
one of them ends the turn the same way:

1. the turn is marked as ending, with the code it is to end with
   (``turn_cancelled``, ``turn_timeout``...): whatever ends it from now on,
   the agent's own failure or the process's exit, ends it with that code
   (:class:`agentrt._turn_rules.TurnRules` maps it), so there is exactly one
   terminal event;
2. when asked to (``interrupt``) and the dialect can interrupt (its host codec
   is :class:`~agentrt.dialect.Interruptible`: ACP's ``session/cancel``,
   stream-json's ``interrupt`` control request), the interrupt is written and
   the agent has :data:`CANCEL_GRACE` seconds to end the turn itself; the
   process then stays;
3. otherwise (awp-jsonl has no interrupt), or when that grace runs out, the
   process gets the bounded stop (shutdown line, SIGTERM, SIGKILL to its
   group) and its exit ends the turn; the next ``send`` starts a new process
   with ``--resume``.

A second request while one is in progress (a second Ctrl-C) does not wait:
the grace is cut short and the process group is killed at once.

Kept apart from the conversation so that it moves as one piece.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Protocol

import trio

from .dialect import Interruptible
from .errors import AgentrtError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._process import AgentProcess
    from ._turn_rules import TurnRules
    from ._turn_stream import TurnState
    from .dialect import HostCodec
    from .events import Event

__all__ = ["CANCEL_GRACE", "KILL_WAIT", "CancelHost", "end_turn"]

CANCEL_GRACE = 3.0
"""How long an agent asked to interrupt has to end the turn itself before its process is stopped."""

KILL_WAIT = 5.0
"""After the process group was killed (a second request), the longest wait for the turn's end."""


class CancelHost(Protocol):
    """What :func:`end_turn` needs of the conversation that owns the turn."""

    _proc: AgentProcess | None
    _codec: HostCodec
    _rules: TurnRules

    async def _stop_process(self) -> None: ...

    async def _dispatch(self, events: Sequence[Event]) -> None: ...


async def end_turn(
    host: CancelHost,
    state: TurnState,
    *,
    code: str = "turn_cancelled",
    message: str = "the turn was cancelled",
    interrupt: bool = True,
) -> None:
    """End the turn of ``state`` early with ``code`` (see the module docstring); bounded.

    Returns once the turn has its terminal event.  Safe to call from several
    tasks: the first request decides the code; a later one, while the first
    still waits, kills the process group at once.
    """
    progress = state.progress
    if progress.terminal is not None:
        return
    if progress.cancel_requested:
        await _at_once(host, state)
        return
    progress.cancel_requested = True
    progress.cancel_code, progress.cancel_message = code, message
    proc = host._proc
    ours = proc is not None and state.proc is proc and not proc.exited.is_set()
    codec = host._codec
    if interrupt and ours and proc is not None and isinstance(codec, Interruptible):
        line = codec.encode_interrupt()
        if line:
            try:
                await proc.send(line)
            except AgentrtError:
                pass  # its stdin is gone: the stop below ends the turn
            else:
                with trio.move_on_after(CANCEL_GRACE) as grace:
                    state.cut_short = grace
                    await state.ended.wait()
                state.cut_short = None
                if progress.terminal is not None:
                    return
    if ours:
        await host._stop_process()
    if progress.terminal is None:  # no process ended it (none was running, or its pump is gone)
        await host._dispatch(host._rules.fail_current(code, message))


async def _at_once(host: CancelHost, state: TurnState) -> None:
    # A second request: no more waiting for the agent.
    if state.cut_short is not None:
        state.cut_short.cancel()
    proc = host._proc
    if proc is not None and state.proc is proc:
        proc.send_signal(signal.SIGKILL)
    with trio.move_on_after(KILL_WAIT):
        await state.ended.wait()
    if state.progress.terminal is None:
        await host._dispatch(host._rules.fail_current(state.progress.cancel_code, state.progress.cancel_message))
