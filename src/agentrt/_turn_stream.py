"""The events of one turn as its caller sees them: :class:`TurnStream`."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType

import trio

from ._turn_rules import TurnProgress
from .dialect import Turn
from .events import Event, TurnCompleted, TurnFailed

__all__ = ["TurnState", "TurnStream"]


class TurnState:
    """The I/O side of one turn: where its events go, and when it ended."""

    def __init__(self, progress: TurnProgress) -> None:
        self.progress = progress
        self.send, self.recv = trio.open_memory_channel[Sequence[Event]](math.inf)
        self.ended = trio.Event()
        # The process this turn was written to: only its exit can end the turn.
        self.proc: object | None = None
        #: Tasks waiting for this turn's next events right now (its stream is being read).
        self.waiting = 0
        #: The wait for the agent's own answer to an interrupt, while there is one (agentrt._cancel).
        self.cut_short: trio.CancelScope | None = None


class TurnStream:
    """The events of one turn, ending with its terminal event.

    Iterating writes the turn (once) and yields events as they arrive::

        async for event in conv.send("hello"):
            ...

    ``await stream.result()`` drains it and returns the terminal event.

    A stream is closable, like httpx's streaming responses: ``await
    stream.aclose()``, or leaving ``async with conv.send(...) as stream:``,
    ends a turn that has not ended exactly as
    :meth:`~agentrt.Conversation.cancel_turn` does (the dialect's interrupt
    where it has one, then the bounded stop; one ``turn_cancelled``); the
    conversation stays usable.  Closing is shielded and bounded; after it,
    iteration ends and :attr:`terminal` holds the turn's terminal event.
    Closing a stream that was never iterated writes nothing.
    """

    def __init__(
        self,
        begin: Callable[[Turn], Awaitable[TurnState]],
        turn: Turn,
        end: Callable[[TurnState], Awaitable[None]] | None = None,
    ) -> None:
        self._begin = begin
        self._end = end
        self._turn = turn
        self._state: TurnState | None = None
        self._buffer: list[Event] = []
        self._pos = 0
        self._done = False
        self._closed = False
        #: The terminal event, once the turn has ended (and been read, or the stream closed).
        self.terminal: TurnCompleted | TurnFailed | None = None

    def __aiter__(self) -> TurnStream:
        return self

    async def __aenter__(self) -> TurnStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _receive(self, state: TurnState) -> Sequence[Event]:
        state.waiting += 1
        try:
            return await state.recv.receive()
        finally:
            state.waiting -= 1

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        state = self._state
        if state is None:  # the first iteration writes the turn
            state = self._state = await self._begin(self._turn)
        while self._pos >= len(self._buffer):
            if self._done:
                raise StopAsyncIteration
            try:
                batch = await self._receive(state)
            except trio.EndOfChannel:
                self._done = True
                raise StopAsyncIteration from None
            self._buffer = list(batch)
            self._pos = 0
        ev = self._buffer[self._pos]
        self._pos += 1
        if isinstance(ev, (TurnCompleted, TurnFailed)):
            self.terminal = ev
            self._done = True
        return ev

    async def batches(self) -> AsyncIterator[Sequence[Event]]:
        """The turn's events a received chunk at a time (cheaper than one at a time).

        Each item is the events one stdout read produced, in order; the last
        item ends with the terminal event.  Use either this or plain iteration
        on one stream, not both.
        """
        if self._closed:
            return
        state = self._state
        if state is None:
            state = self._state = await self._begin(self._turn)
        if self._pos < len(self._buffer):
            # What plain iteration had received but not returned yet; it may end the turn.
            rest = self._buffer[self._pos :]
            self._pos = len(self._buffer)
            if isinstance(rest[-1], (TurnCompleted, TurnFailed)):
                self.terminal = rest[-1]
                self._done = True
            yield rest
        while not self._done and not self._closed:
            try:
                batch = await self._receive(state)
            except trio.EndOfChannel:
                self._done = True
                return
            last = batch[-1] if batch else None
            if isinstance(last, (TurnCompleted, TurnFailed)):
                self.terminal = last
                self._done = True
            yield batch

    async def result(self) -> TurnCompleted | TurnFailed:
        """Consume the rest of the turn and return its terminal event."""
        # A received chunk at a time: draining event by event costs a
        # coroutine step per event for nothing.
        async for _ in self.batches():
            pass
        assert self.terminal is not None
        return self.terminal

    async def aclose(self) -> None:
        """End the turn if it has not ended (as ``cancel_turn()`` does); idempotent, shielded, bounded.

        The bound is the cancel's: :data:`~agentrt.lowlevel.CANCEL_GRACE` for the
        agent's own answer to an interrupt, then the process's bounded stop.
        """
        if self._closed:
            return
        self._closed = True
        state = self._state
        if state is None:
            return  # never started: nothing was written
        if state.progress.terminal is None and self._end is not None:
            with trio.CancelScope(shield=True):
                await self._end(state)
        self._done = True
        if self.terminal is None:
            self.terminal = state.progress.terminal
