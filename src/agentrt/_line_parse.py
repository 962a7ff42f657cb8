"""The framing's parse of complete lines, and what a line its codec does not take becomes.

:class:`LineParser` parses lines by the framing's rules: ``loads`` (orjson)
first, the lenient path after (:func:`agentrt._jsonline.lenient`), a blank line
skipped, a line that is not JSON a numbered :class:`Malformed` marker.  A
:class:`~agentrt._framing.JsonlReader` parses with it; so does the host's read
loop (:class:`agentrt._wire.Pump`) for each line the codec's
:meth:`~agentrt.dialect.HostCodec.decode_lines` hands back to its ``general``:
the object goes to :meth:`~agentrt.dialect.HostCodec.decode`
(:func:`decode_objects`) and a marker becomes a :data:`MALFORMED_LINE` diagnostic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from ._jsonline import MALFORMED, SKIP, lenient
from .events import Diagnostic, Event

if TYPE_CHECKING:
    from .dialect import HostCodec

__all__ = ["MALFORMED_LINE", "LineParser", "Malformed", "decode_objects", "malformed_diagnostic"]

MALFORMED_LINE = "malformed_output_line"
"""The code of the diagnostic that stands for a stdout line that is not JSON."""

_HEAD_BYTES = 200


@attrs.frozen
class Malformed:
    """A stdout line that is not JSON; it is counted, never rendered."""

    count: int
    """How many malformed lines this reader has seen so far, this one included."""
    head: bytes
    """The first 200 bytes of the (stripped) line, for diagnostics."""


class LineParser:
    """Complete lines parsed by the framing's rules (see the module doc), malformed ones counted.

    ``loads`` replaces ``orjson.loads`` as the first parse; it must raise
    :class:`ValueError` for a line it cannot parse (the line then takes the
    lenient path).
    """

    __slots__ = ("_loads", "malformed")

    def __init__(self, loads: Callable[[bytes], Any] | None = None) -> None:
        self._loads = loads if loads is not None else orjson.loads
        #: How many malformed lines were seen so far.
        self.malformed = 0

    def parse(self, line: bytes) -> list[Any]:
        """One complete line: ``[]`` when blank, ``[Malformed]`` when not JSON, else ``[object]``."""
        if line:
            try:
                return [self._loads(line)]
            except ValueError:  # orjson's and msgspec-style decode errors alike
                pass
        obj = self._lenient(line)
        return [] if obj is SKIP else [obj]

    def parse_lines(self, lines: list[bytes]) -> list[Any]:
        """Complete lines in order, each as :meth:`parse` parses it (blank ones give nothing)."""
        try:
            # Fast path: every line is valid JSON as it stands (orjson skips JSON
            # whitespace, including a trailing "\r", by itself); map() keeps the
            # loop in C, but costs more than the parse for a paced agent's one line.
            # A blank line fails here and is skipped by the slow path.
            if len(lines) == 1:
                return [self._loads(lines[0])]
            return list(map(self._loads, lines))
        except ValueError:
            return [obj for line in lines if (obj := self._one(line)) is not SKIP]

    def _one(self, line: bytes) -> Any:
        if line:
            try:
                return self._loads(line)
            except ValueError:
                pass
        return self._lenient(line)

    def _lenient(self, line: bytes) -> Any:
        obj = lenient(line) if line else SKIP
        if obj is MALFORMED:
            self.malformed += 1
            return Malformed(self.malformed, line.strip()[:_HEAD_BYTES])
        return obj


def malformed_diagnostic(marker: Malformed) -> Diagnostic:
    """The :data:`MALFORMED_LINE` diagnostic for a line that is not JSON."""
    return Diagnostic(
        code=MALFORMED_LINE,
        detail=f"malformed stdout line #{marker.count}: {marker.head.decode('utf-8', 'replace')}",
    )


def decode_objects(codec: HostCodec, objs: Sequence[Any]) -> list[Event]:
    """Events for parsed lines one by one; a :class:`Malformed` marker becomes a diagnostic."""
    events: list[Event] = []
    for obj in objs:
        if type(obj) is Malformed:
            events.append(malformed_diagnostic(obj))
        else:
            events.extend(codec.decode(obj))
    return events
