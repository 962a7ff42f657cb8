"""The events of one turn as its caller sees them: :class:`TurnStream`."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

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


class TurnStream:
    """The events of one turn, ending with its terminal event.

    Iterating writes the turn (once) and yields events as they arrive::

        async for event in conv.send("hello"):
            ...

    ``await stream.result()`` drains it and returns the terminal event.
    """

    def __init__(self, begin: Callable[[Turn], Awaitable[TurnState]], turn: Turn) -> None:
        self._begin = begin
        self._turn = turn
        self._state: TurnState | None = None
        self._buffer: list[Event] = []
        self._pos = 0
        self._done = False
        self.terminal: TurnCompleted | TurnFailed | None = None

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> Event:
        if self._state is None:
            self._state = await self._begin(self._turn)
        while self._pos >= len(self._buffer):
            if self._done:
                raise StopAsyncIteration
            try:
                batch = await self._state.recv.receive()
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
        if self._state is None:
            self._state = await self._begin(self._turn)
        if self._pos < len(self._buffer):
            # What plain iteration had received but not returned yet; it may end the turn.
            rest = self._buffer[self._pos :]
            self._pos = len(self._buffer)
            if isinstance(rest[-1], (TurnCompleted, TurnFailed)):
                self.terminal = rest[-1]
                self._done = True
            yield rest
        while not self._done:
            try:
                batch = await self._state.recv.receive()
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
