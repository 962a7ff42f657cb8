"""The chunk-at-a-time path of the host engine on real child processes (:meth:`HostCodec.decode_lines`).

The fixture codec takes the lines that start with ``{"n":`` itself (a
``status`` labelled ``L<n>``) and hands every other line to ``general``, so
what is tested is the pump around it: lines reach the codec unparsed, one call
per chunk; the framing's rules (blank, malformed, oversize, the unterminated
last line) still hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from agentrt.dialect import HostCodec, Turn
from agentrt.events import Event, Status
from agentrt.lowlevel import MALFORMED_LINE

from .test_pump import FLOOD
from .test_pump import _pump as _pump_with


class LinesCodec(HostCodec):
    """``L<n>`` for a line it takes itself, ``<n>`` through ``general`` and ``decode``."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode_turn(self, turn: Turn) -> bytes:
        return b"\n"

    def decode(self, obj: Any) -> Sequence[Event]:
        return (Status(kind="line", label=str(obj.get("n"))),)

    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        self.calls.append(len(lines))
        out: list[Event] = []
        for line in lines:
            if line.startswith(b'{"n":'):
                out.append(Status(kind="line", label=f"L{orjson.loads(line)['n']}"))
            else:
                out.extend(general(line))
        return out

    def finish(self) -> Sequence[Event]:
        return (Status(kind="end"),)


async def _pump(code: str, *, keep_reading: bool) -> tuple[Any, list[str], list[str], LinesCodec]:
    codec = LinesCodec()
    result, seen, before_oversize = await _pump_with(code, keep_reading=keep_reading, codec=codec)
    return result, seen, before_oversize, codec


async def test_lines_reach_the_codec_unparsed_and_the_rest_takes_the_framing_rules() -> None:
    # A blank line gives nothing, a malformed one its diagnostic in place, a JSON
    # line the codec does not take is parsed and decoded; the unterminated last
    # line is parsed at end of output, as on the plain path.
    code = (
        "import sys; sys.stdout.write('{\"n\": 1}\\n\\n  \\nnot json\\n{ \"n\": 2}\\n{\"n\": 3}\\n"
        "{\"n\": 4}')"
    )
    result, seen, _, codec = await _pump(code, keep_reading=False)
    assert seen == ["L1", MALFORMED_LINE, "2", "L3", "4", "end"]
    assert result.eof
    assert codec.calls and sum(codec.calls) == 6  # every complete line, blank ones included


async def test_lines_before_an_oversize_line_are_decoded_by_the_codec() -> None:
    result, seen, before, _ = await _pump(FLOOD, keep_reading=True)
    assert seen[:2] == ["L1", "oversize"] and before in ([], ["L1"])
    assert seen[-2:] == ["L2", "end"]  # fresh framing after the long line, still the lines path
    assert result.eof and not result.oversize


async def test_a_stopping_oversize_policy_ends_the_lines_path_too() -> None:
    result, seen, before, _ = await _pump(FLOOD, keep_reading=False)
    assert seen == ["L1", "oversize"] and before in ([], ["L1"])
    assert result.oversize and not result.eof
