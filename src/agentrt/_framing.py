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

The parts live where the host's read loop uses them: the cut of a raising reader
is :class:`agentrt._wire.LineCut` (the host's stdout), the parse of each line
:class:`agentrt._line_parse.LineParser`; a :class:`JsonlReader` is the two together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from ._jsonline import encode_line, parse_fragment, parse_line
from ._line_parse import LineParser, Malformed
from ._wire import MAX_LINE_BYTES, LineCut, OutputOversize

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


@attrs.frozen
class OversizeLine:
    """A line longer than the reader's cap, discarded (``on_oversize="skip"``)."""

    size: int
    """Its length in bytes, the ``\\n`` not counted."""


class JsonlReader:
    """Incremental JSON Lines parser; feed it stdout chunks as they arrive.

    Any chunking of the same bytes yields the same sequence of objects (and,
    for an oversize line, the same objects before the error).

    ``loads`` replaces ``orjson.loads`` as the first parse of each line (a
    typed decoder for known line shapes, say).  It must raise
    :class:`ValueError` for a line it cannot parse; that line then takes the
    lenient path as usual, yielding a generic object or a :class:`Malformed`
    marker.  The host path does not use it: its read loop cuts lines with
    :class:`~agentrt._wire.LineCut` (the cut :meth:`feed_lines` gives) and
    leaves them to the codec's :meth:`~agentrt.dialect.HostCodec.decode_lines`.

    ``max_line_bytes`` is the longest line accepted.  ``on_oversize`` says
    what a longer line is: ``"raise"`` (the host's stdout, the default)
    raises :class:`OutputOversize` and the reader stays failed; ``"skip"``
    discards the line as it arrives (memory stays bounded by the cap plus one
    chunk) and yields an :class:`OversizeLine` in its place.
    """

    __slots__ = ("_cut", "_cut_lines", "_limit", "_parse", "_parser", "_parts", "_pending", "_skipping")

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
        # A raising reader cuts as the host's stdout is cut; a skipping one by itself, below.
        self._cut = LineCut(max_line_bytes) if on_oversize == "raise" else None
        self._cut_lines = self._cut.cut if self._cut is not None else None  # bound once: feed is per chunk
        # > 0: inside a skipped oversize line, this many bytes of it seen so far.
        self._skipping = 0
        self._parser = LineParser(loads)
        self._parse = self._parser.parse_lines
        # A skipping reader's unterminated tail, as chunks (joined once, not per chunk).
        self._parts: list[bytes] = []
        self._pending = 0

    @property
    def malformed_count(self) -> int:
        """How many malformed lines were seen so far."""
        return self._parser.malformed

    @property
    def pending_bytes(self) -> int:
        """Bytes of the current unterminated line held in memory."""
        return self._cut.pending_bytes if self._cut is not None else self._pending

    def feed(self, chunk: bytes) -> list[Any]:
        """Parse the complete lines that ``chunk`` finishes.

        Returns parsed objects and :class:`Malformed` markers, in order.  Raises
        :class:`OutputOversize` when a line grows past the cap
        (:data:`MAX_LINE_BYTES` by default); the reader stays failed afterwards.
        With ``on_oversize="skip"`` an :class:`OversizeLine` marker stands for
        such a line instead.
        """
        cut = self._cut_lines
        if cut is None:
            return self._feed_skipping(chunk)
        try:
            lines = cut(chunk)
        except OutputOversize as exc:
            raise OutputOversize(self._parse(exc.objects)) from None  # the lines before it, parsed
        return self._parse(lines)

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
        if self._cut is None:
            raise ValueError("feed_lines needs a reader with on_oversize='raise'")
        return self._cut.cut(chunk)

    def parse(self, line: bytes) -> list[Any]:
        """One complete line parsed by the framing's rules: ``[]`` when blank, ``[Malformed]`` when not JSON.

        Otherwise ``[object]``, parsed by this reader's ``loads`` first and the
        lenient path after, exactly as :meth:`feed` parses each of its lines;
        a malformed line counts in :attr:`malformed_count`.
        """
        return self._parser.parse(line)

    def _feed_skipping(self, chunk: bytes) -> list[Any]:
        """``feed`` for ``on_oversize="skip"``: an oversize line becomes an :class:`OversizeLine`."""
        out: list[Any] = []
        limit = self._limit
        start = 0
        while True:
            nl = chunk.find(10, start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            skipping = self._skipping
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
        if self._cut is not None:
            return self._parser.parse(self._cut.finish())
        if self._skipping:
            size, self._skipping = self._skipping, 0
            return [OversizeLine(size)]
        line = b"".join(self._parts)
        self._parts = []
        self._pending = 0
        return self._parser.parse(line)
