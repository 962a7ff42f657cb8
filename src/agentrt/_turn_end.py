"""Ending a turn before its result: one place for every way a turn is cut short.

``Conversation.cancel_turn()``, closing a :class:`~agentrt.TurnStream` that has
not ended (or the next ``send`` after one was abandoned), ``agentrt run``'s
Ctrl-C, SIGTERM and ``--timeout``, and chat's Ctrl-C all come here, so every
one of them ends the turn the same way:

1. the turn is marked as ending, with the code it is to end with
   (``turn_cancelled``, ``turn_timeout``...): whatever ends it from now on,
   the agent's own failure or the process's exit, ends it with that code
   (:class:`agentrt._turns.TurnRules` maps it), so there is exactly one
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

Kept apart from the conversation so that it moves as one piece: it needs
only the turn's state, the engine that runs its process
(:class:`agentrt._engine.HostedProcess`) and a way to fail the turn.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from .dialect import Interruptible
from .errors import AgentrtError

if TYPE_CHECKING:
    from ._conversation import TurnState
    from ._engine import HostedProcess

__all__ = ["CANCEL_GRACE", "KILL_WAIT", "end_turn"]

CANCEL_GRACE = 3.0
"""How long an agent asked to interrupt has to end the turn itself before its process is stopped."""

KILL_WAIT = 5.0
"""After the process group was killed (a second request), the longest wait for the turn's end."""


async def end_turn(
    state: TurnState,
    engine: HostedProcess,
    fail: Callable[[str, str], Awaitable[None]],
    *,
    code: str = "turn_cancelled",
    message: str = "the turn was cancelled",
    interrupt: bool = True,
) -> None:
    """End the turn of ``state`` early with ``code`` (see the module docstring); bounded.

    ``engine`` runs the process the turn was written to; ``fail(code,
    message)`` ends the turn in flight when no process end did.  Returns once
    the turn has its terminal event.  Safe to call from several tasks: the
    first request decides the code; a later one, while the first still waits,
    kills the process group at once.
    """
    progress = state.progress
    if progress.terminal is not None:
        return
    if progress.cancel_requested:
        await _at_once(state, engine, fail)
        return
    progress.cancel_requested = True
    progress.cancel_code, progress.cancel_message = code, message
    proc = engine.process
    ours = proc is not None and state.proc is proc and not proc.exited.is_set()
    codec = engine.codec
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
        await engine.stop()
    if progress.terminal is None:  # no process ended it (none was running, or its pump is gone)
        await fail(code, message)


async def _at_once(state: TurnState, engine: HostedProcess, fail: Callable[[str, str], Awaitable[None]]) -> None:
    # A second request: no more waiting for the agent.
    if state.cut_short is not None:
        state.cut_short.cancel()
    proc = engine.process
    if proc is not None and state.proc is proc:
        proc.send_signal(signal.SIGKILL)
    with trio.move_on_after(KILL_WAIT):
        await state.ended.wait()
    if state.progress.terminal is None:
        await fail(state.progress.cancel_code, state.progress.cancel_message)
