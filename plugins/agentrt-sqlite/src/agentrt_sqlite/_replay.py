"""Replay: a conversation's events again, from its transcript, through its dialect's host decoder.

The output records (``O``) go through the same framing and decoder calls as
the host path (:func:`agentrt.lowlevel.pump_events`): one chunk at a time, a
fresh decoder at each process start (``P``), the framing's and decoder's end
at each process end (``C``).  The bulk kinds it decodes (text and thinking
deltas, tool uses and results) fill, in order, the sequence numbers that the
``E`` records leave free; the ``E`` events (turn starts and ends, sessions,
diagnostics, exits...) take their own.  The result is the live stream, event
for event (the replay test checks it on every capture of a real peer).

Events come back as envelopes ``{"source", "seq", "mono", "wall", "event"}``
with the event's JSON form; ``mono`` counts seconds from the transcript's
start, ``wall`` is the Unix time the record was written (an ``E`` event: the
time of its batch).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from agentrt.dialect import HostCodec
from agentrt.events import Event
from agentrt.lowlevel import JsonlReader, Malformed, OutputOversize

from ._encode import encode_event
from ._notes import BULK
from ._transcript import OpenFiles, read_header, read_records

__all__ = ["CodecFor", "Decoder", "default_codec", "replay"]

#: Gives a fresh host codec for a dialect name (``None``: the dialect is not installed).
CodecFor = Callable[[str], "HostCodec | None"]


def default_codec(dialect: str) -> HostCodec | None:
    """A fresh host codec of the installed dialect ``dialect``, else ``None``."""
    from agentrt import get_plugins
    from agentrt.errors import AgentrtError

    try:
        return get_plugins().dialect(dialect).host_codec()
    except AgentrtError:
        return None


class Decoder:
    """One agent process's output decoded chunk by chunk, as the host path decodes it.

    Each chunk's complete lines go to the codec's
    :meth:`~agentrt.dialect.HostCodec.decode_lines`, the lines it does not
    take to the framing's rules and :meth:`~agentrt.dialect.HostCodec.decode`
    (a codec's fast paths give the same events: a clause of ``check_dialect``).
    """

    def __init__(self, codec: HostCodec) -> None:
        self.codec = codec
        self._reader = JsonlReader()

    def _objects(self, objs: list[Any]) -> list[Event]:
        out: list[Event] = []
        for obj in objs:
            if type(obj) is not Malformed:  # its diagnostic is an E event
                out.extend(self.codec.decode(obj))
        return out

    def _general(self, line: bytes) -> list[Event]:
        return self._objects(self._reader.parse(line))

    def chunk(self, data: bytes) -> list[Event]:
        """The events of one chunk read from stdout."""
        codec = self.codec
        try:
            lines = self._reader.feed_lines(data)
        except OutputOversize as exc:
            # What preceded the long line counts; reading went on with fresh framing.
            before = codec.decode_lines(list(exc.objects), self._general)
            self._reader = JsonlReader()
            return before
        if not lines:
            return []
        events = codec.decode_lines(lines, self._general)
        codec.drain_output()  # what it owed the agent was written live: the I records have it
        return events

    def finish(self) -> list[Event]:
        """The events owed at the end of output."""
        tail = self._objects(self._reader.finish())
        tail.extend(self.codec.finish())
        return tail


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # a lone surrogate, kept as its escape: orjson refuses it


def _marks(path: Path, end: int | None, files: OpenFiles | None) -> Iterator[tuple[int, int, Any, float, float]]:
    # The E events in order of their sequence numbers (the sink writes them so), read lazily:
    # (seq, eats, JSON form, wall, seconds from the start).  One record (a batch) at a time in memory.
    for _kind, ms, _at, payload in read_records(path, 0, end, kinds=b"E", files=files):
        record = _loads(payload)
        wall = float(record["wall"])
        for seq, eat, event in record["events"]:
            yield int(seq), int(eat), event, wall, ms / 1000


def replay(
    path: Path, source: str, *, end: int | None = None, codec_for: CodecFor = default_codec,
    files: OpenFiles | None = None,
) -> Iterator[dict[str, Any]]:
    """The conversation's events from its transcript at ``path``, in order (see the module docstring).

    ``end`` stops at that offset (a turn's ``tx_end``).  A dialect that is not
    installed any more yields the ``E`` events only, then an
    ``invalid_cli_protocol`` diagnostic saying so.  Streams: the ``E`` records
    and the output are read side by side, so the memory a replay takes is a
    record's, whatever the transcript's size, and a reader that stops early
    reads no further.  With ``files``, its two readers' files can be closed
    while it is paused (:class:`~agentrt_sqlite._transcript.OpenFiles`).
    """
    header = read_header(path)
    wall0 = float(header.get("wall") or 0.0)
    marks = _marks(path, end, files)
    mark = next(marks, None)
    seq = 0
    eat = 0
    missing: set[str] = set()

    def put(event: Event, ms: int) -> Iterator[dict[str, Any]]:
        nonlocal seq, eat, mark
        while mark is not None and mark[0] <= seq:
            at, eats, data, wall, mono = mark
            yield {"source": source, "seq": at, "mono": mono, "wall": wall, "event": data}
            seq = max(seq, at + 1)
            eat += eats
            mark = next(marks, None)
        if eat:  # the live stream has the rules' diagnostic in this event's place
            eat -= 1
            return
        yield {"source": source, "seq": seq, "mono": ms / 1000, "wall": wall0 + ms / 1000,
               "event": _loads(encode_event(event))}
        seq += 1

    decoder: Decoder | None = None
    for kind, ms, _at, payload in read_records(path, 0, end, kinds=b"POC", files=files):
        if kind == b"P":
            meta = orjson.loads(payload)
            decoder = None
            if meta.get("replay", "decode") != "decode":
                continue  # every event of this process is an E record
            dialect = meta.get("dialect") or header.get("dialect") or ""
            codec = codec_for(dialect) if dialect else None
            if codec is None:
                missing.add(str(dialect))
            decoder = None if codec is None else Decoder(codec)
            continue
        if decoder is None:
            continue
        events = decoder.chunk(payload) if kind == b"O" else decoder.finish()
        if kind == b"C":
            decoder = None
        for event in events:
            if type(event) in BULK:
                yield from put(event, ms)
    while mark is not None:
        at, _eats, data, wall, mono = mark
        yield {"source": source, "seq": at, "mono": mono, "wall": wall, "event": data}
        mark = next(marks, None)
    for dialect in sorted(missing):
        detail = f"the dialect {dialect[:64]!r} is not installed: only the events agentrt made itself are shown"
        yield {"source": source, "seq": None, "mono": None, "wall": None,
               "event": {"type": "diagnostic", "code": "invalid_cli_protocol", "detail": detail}}
