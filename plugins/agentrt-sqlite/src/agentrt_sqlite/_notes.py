"""The trio side of the database sink: a batch's events into ``E`` records and an index note.

A conversation whose agent process is tapped has its output in the transcript
already (``O`` records), so the events a replay decodes again from those bytes
(the bulk kinds: :data:`BULK`) cost nothing here but a type test per batch,
and the reply text the ``turns`` row keeps (up to its cap).  Every other
event (turn starts and ends, sessions, diagnostics, exits, control requests:
a few per turn) is written as its JSON form with its sequence number in one
``E`` record per batch, so a replay puts it back at its place.  Without a tap
(a host loop that does not call one), every event is written that way.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentrt.events import (
    Diagnostic,
    Event,
    EventBatch,
    ProcessExited,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)

from ._encode import encode_event
from ._recorder import DERIVING, Note
from ._transcript import Transcript

__all__ = ["BULK", "ConversationLog", "eats"]

#: The event kinds a replay takes from the decoder (the bulk of every session).
BULK: frozenset[type[Event]] = frozenset({TextDelta, ThinkingDelta, ToolUse, ToolResult})

#: The dialects whose host decoder gives the same events from the agent's output
#: alone, whatever agentrt wrote to the agent: their bulk events are replayed
#: from the ``O`` records.  Another dialect's decoder may depend on its own
#: requests (ACP's matches responses to the requests it sent, and marks the
#: history a ``session/load`` replays): its raw bytes are recorded all the
#: same, and every event is an ``E`` record, so its replay is exact too.
DECODE_ALONE = frozenset({"stream-json", "awp-jsonl"})
_BULK_NAMES = frozenset({"text", *(cls.type for cls in BULK)})


def eats(event: Event) -> bool:
    """True when ``event`` stands in the live stream for a decoded bulk event (the turn rules replaced it).

    That is the ``output_before_input`` diagnostic the rules make of output
    before the first input: its detail names the kind it replaced.
    """
    if type(event) is not Diagnostic or event.code != "output_before_input":
        return False
    return event.detail.split(" ", 1)[0] in _BULK_NAMES


class _Reply:
    """The first ``limit`` characters of a turn's reply."""

    __slots__ = ("clipped", "limit", "parts", "size")

    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit
        self.clipped = False

    def add(self, text: str) -> None:
        room = self.limit - self.size
        if len(text) > room:
            text = text[: max(room, 0)]
            self.clipped = True
        self.parts.append(text)
        self.size += len(text)

    def add_all(self, events: Any) -> None:
        """The texts of the text deltas among ``events``, up to the limit (no text past it is copied)."""
        for event in events:
            if type(event) is TextDelta:
                self.add(event.text)
                if self.clipped:
                    return

    def text(self) -> str:
        return "".join(self.parts)


class ConversationLog:
    """One conversation as the sink records it: its transcript and its turn in flight."""

    def __init__(self, source: str, transcript: Transcript, reply_limit: int) -> None:
        self.source = source
        self.transcript = transcript
        self.reply_limit = reply_limit
        self._reply: _Reply | None = None
        self._announced = False  # the index has the conversation's row (and its transcript's name)

    def take(self, batch: EventBatch) -> Note | None:
        """Record ``batch``: its ``E`` record (when it has one) and what it adds to the index."""
        events = batch.events
        reply = self._reply
        if self.transcript.decoded:
            # The events a replay cannot decode again, with their places: a few per chunk (one
            # comprehension per batch; the bulk ones cost nothing more here).
            rest = [(i, event) for i, event in enumerate(events) if type(event) not in BULK]
            if not rest and self._announced:
                # The hot path: a chunk's worth of decoded text, already in the transcript.
                if reply is not None and not reply.clipped:
                    reply.add_all(events)
                return None
        else:
            rest = list(enumerate(events))
        entries: list[bytes] = []
        items: list[tuple[int, Event, Any]] = []
        first = batch.first_seq
        done = 0  # the events before this one went to the reply already
        for i, event in rest:
            if reply is not None and not reply.clipped and i > done:
                reply.add_all(events[done:i])  # the text before this event belongs to the turn it ends
            done = i + 1
            cls = type(event)
            if type(event) is TextDelta and reply is not None and not reply.clipped:  # not tapped (narrowed for mypy)
                reply.add(event.text)
            seq = first + i
            entries.append(b"[%d,%d,%s]" % (seq, eats(event), encode_event(event)))
            if isinstance(event, DERIVING):
                if cls is TurnStarted:
                    reply = self._reply = _Reply(self.reply_limit)
                    items.append((seq, event, None))
                elif cls is TurnCompleted or cls is TurnFailed:
                    if reply is not None:
                        items.append((seq, event, (reply.text(), reply.clipped, None)))
                    else:
                        items.append((seq, event, ("", False, None)))
                    reply = self._reply = None
                else:
                    items.append((seq, event, None))
        if reply is not None and not reply.clipped and done < len(events):
            reply.add_all(events[done:])
        size = 0
        if entries:
            head = b'{"wall":%s,"mono":%s,"events":[' % (orjson.dumps(batch.wall), orjson.dumps(batch.mono))
            at = self.transcript.append(b"E", head + b",".join(entries) + b"]}")
            end = self.transcript.size
            for i, (s, ev, extra) in enumerate(items):
                if type(ev) is TurnStarted:
                    items[i] = (s, ev, at)
                elif extra is not None and isinstance(ev, (TurnCompleted, TurnFailed)):
                    items[i] = (s, ev, (extra[0], extra[1], end))
                    size += len(extra[0])
                elif type(ev) is ProcessExited and self.transcript.taps == 0:
                    # The process is done with: no descriptor stays open for an idle conversation
                    # (a later record reopens the file).
                    self.transcript.release()
        if not items and self._announced:
            return None
        self._announced = True
        name = None if self.transcript.failed else self.transcript.path.name
        return Note(self.source, name, batch.mono, batch.wall, items, size)
