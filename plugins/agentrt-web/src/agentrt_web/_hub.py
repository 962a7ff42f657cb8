"""Live updates: a publish/subscribe hub whose subscribers are server-sent-event streams.

A message is serialized once (``publish`` takes bytes already framed as one
SSE event) and handed to every subscriber of its topic without waiting: each
subscriber has its own bounded buffer, and one that falls that far behind is
closed (its browser reconnects and reloads the page, which renders the state
from the server).  So a slow browser never slows the agent's pump.

``close()`` ends every stream at once; the server calls it before it stops
listening, which is why shutdown does not wait for the browsers to go away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import trio

__all__ = ["Hub", "sse_frame"]

#: Messages a subscriber may have waiting before it is dropped.
SUBSCRIBER_BUFFER = 512
#: A comment line is sent when a stream has been idle this long (keeps proxies and dead peers honest).
HEARTBEAT = 15.0


def sse_frame(payload: Any, event: str | None = None) -> bytes:
    """One SSE event whose data is ``payload`` as JSON (a single ``data:`` line: JSON has no newlines)."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


class _Subscriber:
    __slots__ = ("receive", "send", "topic")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.send, self.receive = trio.open_memory_channel[bytes](SUBSCRIBER_BUFFER)


class Hub:
    """Topics (``"thread:<name>"``, ``"bots"``...) fanned out to SSE streams."""

    def __init__(self) -> None:
        self._topics: dict[str, set[_Subscriber]] = {}
        self.closed = False
        #: Subscribers dropped for falling behind (read by tests and the benchmark).
        self.dropped = 0

    def subscribers(self, topic: str) -> int:
        """How many streams listen on ``topic``."""
        return len(self._topics.get(topic, ()))

    def publish(self, topic: str, frame: bytes) -> None:
        """Queue ``frame`` for every subscriber of ``topic``; never waits."""
        subs = self._topics.get(topic)
        if not subs:
            return
        for sub in list(subs):
            try:
                sub.send.send_nowait(frame)
            except trio.WouldBlock:
                self.dropped += 1
                self._drop(sub)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._drop(sub)

    def _drop(self, sub: _Subscriber) -> None:
        subs = self._topics.get(sub.topic)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._topics[sub.topic]
        sub.send.close()

    def close(self) -> None:
        """End every stream now (idempotent); later subscribers end at once."""
        self.closed = True
        for subs in list(self._topics.values()):
            for sub in list(subs):
                self._drop(sub)

    async def stream(self, topic: str, first: bytes = b"") -> AsyncIterator[bytes]:
        """The body of one SSE response: ``first``, then every frame published on ``topic``."""
        sub = _Subscriber(topic)
        if self.closed:
            sub.send.close()
        else:
            self._topics.setdefault(topic, set()).add(sub)
        try:
            # The retry hint makes browsers reconnect quickly after a drop.
            yield b"retry: 1000\n" + (first or b": open\n\n")
            while True:
                with trio.move_on_after(HEARTBEAT) as idle:
                    try:
                        frame = await sub.receive.receive()
                    except trio.EndOfChannel:
                        return
                if idle.cancelled_caught:
                    yield b": ping\n\n"
                    continue
                # Send what else is already waiting in the same write.
                frames = [frame]
                while True:
                    try:
                        frames.append(sub.receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                yield b"".join(frames)
        finally:
            self._drop(sub)
