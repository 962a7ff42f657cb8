"""JSON Lines framing: the one place that turns stdout bytes into parsed objects.

Rules (the AWP host's, made independent of how the bytes are chunked):

* lines end at ``\\n``; a trailing ``\\r`` and surrounding whitespace are stripped;
  blank lines are skipped;
* a line that is not JSON becomes a :class:`Malformed` marker (never rendered,
  never fatal); invalid UTF-8 is replaced with U+FFFD before parsing, as the
  original host's non-fatal streaming decoder does;
* a lone surrogate escape (``"\\ud83d"``: JavaScript's ``slice()`` cuts an emoji
  in half and ``JSON.parse`` accepts it) is replaced with U+FFFD, so every string
  that leaves the framing can be encoded as UTF-8 by every sink;
* a line whose raw length (without its ``\\n``) exceeds :data:`MAX_LINE_BYTES`
  (or the reader's ``max_line_bytes``) is fatal by default: :class:`OutputOversize`
  (code ``runtime_output_oversize``) is raised as soon as ``MAX_LINE_BYTES + 1``
  bytes of it have been seen, so a flood is never buffered beyond the cap plus
  one chunk.  With ``on_oversize="skip"`` (the reference agent's stdin, where an
  oversize line is a per-turn error) the line is discarded as it arrives and an
  :class:`OversizeLine` marker takes its place.

The original host checks the cap on its whole buffer *before* splitting, which
makes the outcome depend on chunk boundaries; checking per line gives the same
answer for every chunking, which is what lets the property tests hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NoReturn

import attrs
import orjson

from ._jsonline import MALFORMED, SKIP, encode_line, lenient, parse_fragment, parse_line
from .errors import TurnError

__all__ = [
    "MAX_LINE_BYTES",
    "Malformed",
    "OversizeLine",
    "OutputOversize",
    "JsonlReader",
    "encode_line",
    "parse_fragment",
    "parse_line",
]

MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest stdout line accepted, in bytes (the ``\\n`` not counted)."""

_HEAD_BYTES = 200

_loads = orjson.loads


@attrs.frozen
class Malformed:
    """A stdout line that is not JSON; it is counted, never rendered."""

    count: int
    """How many malformed lines this reader has seen so far, this one included."""
    head: bytes
    """The first 200 bytes of the (stripped) line, for diagnostics."""


@attrs.frozen
class OversizeLine:
    """A line longer than the reader's cap, discarded (``on_oversize="skip"``)."""

    size: int
    """Its length in bytes, the ``\\n`` not counted."""


class OutputOversize(TurnError):
    """A stdout line longer than :data:`MAX_LINE_BYTES` (code ``runtime_output_oversize``).

    ``objects`` holds what the failing :meth:`JsonlReader.feed` call had parsed
    from complete lines *before* the oversize one, so nothing that arrived in
    the same chunk is lost.
    """

    objects: list[Any]

    def __init__(self, objects: list[Any] | None = None) -> None:
        super().__init__(
            "runtime_output_oversize",
            f"a stdout line exceeded {MAX_LINE_BYTES} bytes without a newline",
        )
        self.objects = objects if objects is not None else []


class JsonlReader:
    """Incremental JSON Lines parser; feed it stdout chunks as they arrive.

    Any chunking of the same bytes yields the same sequence of objects (and,
    for an oversize line, the same objects before the error).

    ``loads`` replaces ``orjson.loads`` as the first parse of each line (a
    typed decoder for known line shapes, say).  It must raise
    :class:`ValueError` for a line it cannot parse; that line then takes the
    lenient path as usual, yielding a generic object or a :class:`Malformed`
    marker.  The host path does not use it: it reads with :meth:`feed_lines`
    and leaves the lines to the codec's
    :meth:`~agentrt.dialect.HostCodec.decode_lines`.

    ``max_line_bytes`` is the longest line accepted.  ``on_oversize`` says
    what a longer line is: ``"raise"`` (the host's stdout, the default)
    raises :class:`OutputOversize` and the reader stays failed; ``"skip"``
    discards the line as it arrives (memory stays bounded by the cap plus one
    chunk) and yields an :class:`OversizeLine` in its place.
    """

    __slots__ = ("_failed", "_fast_max", "_limit", "_loads", "_malformed", "_parts", "_pending", "_skipping")

    def __init__(
        self,
        loads: Callable[[bytes], Any] | None = None,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        on_oversize: Literal["raise", "skip"] = "raise",
    ) -> None:
        if on_oversize not in ("raise", "skip"):
            raise ValueError(f"on_oversize must be 'raise' or 'skip', not {on_oversize!r}")
        self._limit = max_line_bytes
        # The one-line fast path of feed() is for the raising reader; -1 turns it off.
        self._fast_max = max_line_bytes if on_oversize == "raise" else -1
        # > 0: inside a skipped oversize line, this many bytes of it seen so far;
        # None: oversize lines raise.
        self._skipping: int | None = 0 if on_oversize == "skip" else None
        self._loads = loads if loads is not None else _loads
        # The unterminated tail, kept as a list of chunks so that a big line
        # arriving in many chunks is joined once, not re-concatenated per chunk.
        self._parts: list[bytes] = []
        self._pending = 0
        self._malformed = 0
        self._failed = False

    @property
    def malformed_count(self) -> int:
        """How many malformed lines were seen so far."""
        return self._malformed

    @property
    def pending_bytes(self) -> int:
        """Bytes of the current unterminated line held in memory."""
        return self._pending

    def feed(self, chunk: bytes) -> list[Any]:
        """Parse the complete lines that ``chunk`` finishes.

        Returns parsed objects and :class:`Malformed` markers, in order.  Raises
        :class:`OutputOversize` when a line grows past the cap
        (:data:`MAX_LINE_BYTES` by default); the reader stays failed afterwards.
        With ``on_oversize="skip"`` an :class:`OversizeLine` marker stands for
        such a line instead.
        """
        # Fast path, the common case of a paced agent: nothing pending and the
        # chunk is exactly one complete line (orjson skips the trailing "\n").
        if not self._parts:
            last = len(chunk) - 1
            if 0 < last <= self._fast_max and chunk.find(10) == last:
                try:
                    return [self._loads(chunk)]
                except ValueError:  # orjson's and msgspec-style decode errors alike
                    pass
        return self._feed(chunk, self._parse)

    def feed_lines(self, chunk: bytes) -> list[bytes]:
        """The complete lines that ``chunk`` finishes, as bytes, unparsed (the chunk-at-a-time path).

        The same lines, in the same order, that :meth:`feed` would parse, with
        the same cap (:class:`OutputOversize`, whose ``objects`` are then the
        lines before the long one); blank lines are included.  Each line is
        then parsed by its consumer, a codec's
        :meth:`~agentrt.dialect.HostCodec.decode_lines`, which hands the lines
        it does not take to :meth:`parse` (the framing's rules for one line).
        Only for a reader that raises on oversize lines.
        """
        if self._skipping is not None:
            raise ValueError("feed_lines needs a reader with on_oversize='raise'")
        if not self._parts:
            last = len(chunk) - 1
            # One complete line, as feed's fast path takes it (the "\n" kept:
            # JSON parsers skip it as whitespace).
            if 0 < last <= self._fast_max and chunk.find(10) == last:
                return [chunk]
        return self._feed(chunk, _as_lines)

    def parse(self, line: bytes) -> list[Any]:
        """One complete line parsed by the framing's rules: ``[]`` when blank, ``[Malformed]`` when not JSON.

        Otherwise ``[object]``, parsed by this reader's ``loads`` first and the
        lenient path after, exactly as :meth:`feed` parses each of its lines;
        a malformed line counts in :attr:`malformed_count`.
        """
        obj = self._parse_slow(line)
        return [] if obj is SKIP else [obj]

    def _feed(self, chunk: bytes, parse: Callable[[list[bytes]], list[Any]]) -> list[Any]:
        if self._skipping is not None:
            return self._feed_skipping(chunk)
        if self._failed:
            raise OutputOversize()
        limit = self._limit
        first_nl = chunk.find(10)  # an int needle takes the single-byte path
        if first_nl < 0:
            if chunk:
                self._pending += len(chunk)
                self._parts.append(chunk)
                if self._pending > limit:
                    self._fail()
            return []
        lines = chunk.split(b"\n")
        if self._parts:
            if self._pending + first_nl > limit:
                self._fail()
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
            self._parts = []
            self._pending = 0
        if len(chunk) > limit:
            # Only a chunk bigger than the cap can hold an oversize complete line
            # (a merged first line was checked above and passes here).
            for index in range(len(lines) - 1):
                if len(lines[index]) > limit:
                    self._fail(parse(lines[:index]))
        # The last item is the unterminated tail (b"" when the chunk ends with "\n").
        tail = lines.pop()
        if tail:
            if len(tail) > limit:
                self._fail(parse(lines))
            self._parts.append(tail)
            self._pending = len(tail)
        return parse(lines)

    def _feed_skipping(self, chunk: bytes) -> list[Any]:
        """``feed`` for ``on_oversize="skip"``: an oversize line becomes an :class:`OversizeLine`."""
        out: list[Any] = []
        limit = self._limit
        start = 0
        while True:
            nl = chunk.find(10, start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            skipping = self._skipping or 0
            size = (skipping or self._pending) + len(piece)
            if skipping or size > limit:
                # Inside an oversize line: count it, keep none of it.
                self._parts = []
                self._pending = 0
                self._skipping = size
                if nl >= 0:
                    out.append(OversizeLine(size))
                    self._skipping = 0
            elif nl >= 0:
                self._parts.append(piece)
                line = b"".join(self._parts)
                self._parts = []
                self._pending = 0
                out.extend(self._parse([line]))
            elif piece:
                self._parts.append(piece)
                self._pending = size
            if nl < 0:
                return out
            start = nl + 1

    def finish(self) -> list[Any]:
        """At end of output: parse the final line if it had no newline."""
        if self._skipping:
            size, self._skipping = self._skipping, 0
            return [OversizeLine(size)]
        if self._failed:
            raise OutputOversize()
        if not self._parts:
            return []
        line = b"".join(self._parts)
        self._parts = []
        self._pending = 0
        return self._parse([line])

    def _fail(self, objects: list[Any] | None = None) -> NoReturn:
        self._failed = True
        # A non-empty list keeps feed() off its fast path, into the failed check.
        self._parts = [b""]
        self._pending = 0
        raise OutputOversize(objects)

    def _parse(self, lines: list[bytes]) -> list[Any]:
        try:
            # Fast path: every line is valid JSON as it stands (orjson skips JSON
            # whitespace, including a trailing "\r", by itself); map() keeps the
            # loop in C.  A blank line fails here and is skipped by the slow path.
            return list(map(self._loads, lines))
        except ValueError:
            return [obj for line in lines if (obj := self._parse_slow(line)) is not SKIP]

    def _parse_slow(self, line: bytes) -> Any:
        if not line:
            return SKIP
        try:
            return self._loads(line)
        except ValueError:
            pass
        obj = lenient(line)
        if obj is MALFORMED:
            self._malformed += 1
            return Malformed(self._malformed, line.strip()[:_HEAD_BYTES])
        return obj


def _as_lines(lines: list[bytes]) -> list[Any]:
    # feed_lines' "parse": the lines themselves.
    return lines
