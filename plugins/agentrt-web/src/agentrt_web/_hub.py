"""Live updates: a publish/subscribe hub whose subscribers are server-sent-event streams.

A message is serialized once (``publish`` takes bytes already framed as one
SSE event) and handed to every subscriber of its topic without waiting: each
subscriber has its own bounded buffer, and one that falls that far behind is
closed.  So a slow browser never slows the agent's pump.

Nothing is lost between a page being drawn and its stream connecting, or
across a dropped connection: every frame gets an id (``<epoch>:<seq>``), the
hub keeps each topic's recent frames, and a stream opened with the last id
the page saw (the page's ``data-last`` attribute, or the browser's own
``Last-Event-ID`` on reconnect) first replays what came after it.  When that
is no longer possible (too far behind, or the server restarted: another
epoch) the stream sends a ``reload`` event and the page redraws from the
server.

A topic lives while it has subscribers or frames nobody has come for yet:
when its last subscriber leaves it is freed (only its last frame number is
kept, in a bounded table), so streams opened and closed do not grow memory.
The routes open streams only for conversations and bots that exist.

``close()`` ends every stream at once; the server calls it before it stops
listening, which is why shutdown does not wait for the browsers to go away.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from typing import Any

import orjson
import trio

__all__ = ["Hub", "Subscriber", "sse_frame", "RELOAD"]

#: Messages a subscriber may have waiting before it is dropped.
SUBSCRIBER_BUFFER = 512
#: Recent frames kept per topic for replay.
REPLAY = 256
#: A comment line is sent to every stream this often (keeps proxies and dead peers honest).
HEARTBEAT = 15.0
#: Freed topics whose last frame number is remembered (so a page drawn before still resumes without a reload).
FORGOTTEN = 4096
#: Tells the page to redraw from the server.
RELOAD = b"event: reload\ndata: {}\n\n"


def sse_frame(payload: Any, event: str | None = None) -> bytes:
    """One SSE event whose data is ``payload`` as JSON (a single ``data:`` line: JSON has no newlines)."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


class Subscriber:
    """One stream's buffer (create with :meth:`Hub.subscribe`)."""

    __slots__ = ("backlog", "receive", "send", "topic")

    def __init__(self, topic: str, backlog: list[bytes]) -> None:
        self.topic = topic
        self.backlog = backlog
        self.send, self.receive = trio.open_memory_channel[bytes](SUBSCRIBER_BUFFER)


class _Topic:
    __slots__ = ("recent", "seq", "subs")

    def __init__(self) -> None:
        self.seq = 0
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=REPLAY)
        self.subs: set[Subscriber] = set()


class Hub:
    """Topics (``"thread:<name>"``, ``"bots"``...) fanned out to SSE streams."""

    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}
        # The last frame number of freed topics (bounded; the oldest go first).
        self._forgotten: OrderedDict[str, int] = OrderedDict()
        self._idle = trio.Event()
        self.closed = False
        #: Distinguishes this server run's frame ids from a previous run's.
        self.epoch = secrets.token_hex(4)
        #: Subscribers dropped for falling behind (read by tests and the benchmark).
        self.dropped = 0

    def _topic(self, name: str) -> _Topic:
        t = self._topics.get(name)
        if t is None:
            t = self._topics[name] = _Topic()
            t.seq = self._forgotten.pop(name, 0)
        return t

    def topics(self) -> int:
        """How many topics are held (read by tests and the benchmark)."""
        return len(self._topics)

    def streams(self) -> int:
        """How many streams are attached, over all topics."""
        return sum(len(t.subs) for t in self._topics.values())

    async def wait_idle(self) -> None:
        """Return once no stream is attached (every stream's response has ended)."""
        while self.streams():
            await self._idle.wait()

    def forget(self, topic: str) -> None:
        """Free ``topic`` (its conversation is gone): its streams end, nothing is remembered."""
        t = self._topics.get(topic)
        if t is not None:
            for sub in list(t.subs):
                self._drop(sub)
        self._topics.pop(topic, None)
        self._forgotten.pop(topic, None)

    def subscribers(self, topic: str) -> int:
        """How many streams listen on ``topic``."""
        t = self._topics.get(topic)
        return len(t.subs) if t is not None else 0

    def last_id(self, topic: str) -> str:
        """The id of the topic's latest frame (what a freshly drawn page has seen)."""
        t = self._topics.get(topic)
        return f"{self.epoch}:{t.seq if t is not None else self._forgotten.get(topic, 0)}"

    def publish(self, topic: str, frame: bytes) -> None:
        """Number ``frame``, keep it for replay, queue it for every subscriber; never waits."""
        t = self._topic(topic)
        t.seq += 1
        framed = b"id: %s:%d\n%s" % (self.epoch.encode(), t.seq, frame)
        t.recent.append((t.seq, framed))
        self._fan_out(t, framed)

    def _fan_out(self, t: _Topic, framed: bytes) -> None:
        for sub in list(t.subs):
            try:
                sub.send.send_nowait(framed)
            except trio.WouldBlock:
                self.dropped += 1
                self._drop(sub)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._drop(sub)

    def ping(self) -> None:
        """A comment line to every stream (not numbered, not kept)."""
        for t in list(self._topics.values()):
            self._fan_out(t, b": ping\n\n")

    def _drop(self, sub: Subscriber) -> None:
        t = self._topics.get(sub.topic)
        if t is not None and sub in t.subs:
            t.subs.discard(sub)
            if not t.subs:
                self._free(sub.topic, t)
        sub.send.close()

    def _free(self, name: str, t: _Topic) -> None:
        # The last subscriber left: keep only the frame number, so ids stay monotonic for pages drawn before.
        del self._topics[name]
        self._forgotten[name] = t.seq
        self._forgotten.move_to_end(name)
        while len(self._forgotten) > FORGOTTEN:
            self._forgotten.popitem(last=False)
        if not self.streams():
            self._idle.set()
            self._idle = trio.Event()

    def subscribe(self, topic: str, last_id: str | None = None) -> Subscriber:
        """A subscriber of ``topic`` from now on, with the frames after ``last_id`` (if any) to replay first.

        Subscribe before the response starts, so nothing published in between is missed.
        """
        if self.closed:
            sub = Subscriber(topic, [])
            sub.send.close()
            return sub
        t = self._topic(topic)
        sub = Subscriber(topic, self._replay(t, last_id))
        t.subs.add(sub)
        return sub

    def _replay(self, t: _Topic, last_id: str | None) -> list[bytes]:
        if not last_id:
            return []
        epoch, _, num = last_id.strip().partition(":")
        if epoch != self.epoch or not num.isdigit():
            return [RELOAD]  # another server run: the page's view is stale
        seen = int(num)
        if seen > t.seq:
            return [RELOAD]
        if seen == t.seq:
            return []
        oldest = t.recent[0][0] if t.recent else t.seq + 1
        if seen + 1 < oldest:
            return [RELOAD]  # missed more than we keep
        return [framed for seq, framed in t.recent if seq > seen]

    async def heartbeat(self, interval: float = HEARTBEAT) -> None:
        """Ping every stream every ``interval`` seconds until closed (one task for all streams)."""
        while not self.closed:
            await trio.sleep(interval)
            self.ping()

    def close(self) -> None:
        """End every stream now (idempotent); later subscribers end at once."""
        self.closed = True
        for t in list(self._topics.values()):
            for sub in list(t.subs):
                self._drop(sub)

    async def stream(self, sub: Subscriber) -> AsyncIterator[bytes]:
        """The body of one SSE response: the replay, then every frame published on the topic."""
        try:
            # The retry hint makes browsers reconnect quickly after a drop.
            yield b"retry: 1000\n: open\n\n" + b"".join(sub.backlog)
            sub.backlog = []
            while True:
                try:
                    frame = await sub.receive.receive()
                except trio.EndOfChannel:
                    return
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
