"""Typed first parse of the awp-jsonl hot line: a bare ``content_block_delta`` event.

Most of a streaming reply's lines are content-block deltas.  Parsing one into
dicts builds two dicts and several strings, of which the decoder reads two
values; msgspec decodes the same line straight into small structs and skips
(but still validates) every field it does not need, in about half the time.
The event then carries the line itself as ``raw`` (bytes), and
:attr:`agentrt.events.Event.raw` builds the dict only if someone reads it.

Exactness: a line is taken here only when msgspec accepts it whole; anything
else (another shape, a wrong type, a value msgspec refuses) is parsed by
orjson as usual, so the codec's general path sees it.  msgspec's validation
of skipped values is as strict as orjson's, except that it does not check
UTF-8 inside skipped strings; the framing repairs such a line (U+FFFD) and
parses it, so the events are the same either way, and ``Event.raw`` applies the
same repair.  The structs are not tracked by the garbage collector (they hold
only strings, numbers and each other, so no cycle can form): one object fewer
to walk per line.  The equivalence is a property test (tests/dialects) and
clause 9 of ``check_dialect``.

The stream-json dialect reuses these structs inside its ``stream_event`` line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import msgspec
import orjson

__all__ = [
    "BlockDelta",
    "JsonDelta",
    "SignatureDelta",
    "TextDeltaBody",
    "ThinkingDeltaBody",
    "load_line",
    "typed_loader",
]


class TextDeltaBody(msgspec.Struct, tag="text_delta", tag_field="type", gc=False):
    """``{"type":"text_delta","text":...}``."""

    text: str


class ThinkingDeltaBody(msgspec.Struct, tag="thinking_delta", tag_field="type", gc=False):
    """``{"type":"thinking_delta","thinking":...}``."""

    thinking: str


class JsonDelta(msgspec.Struct, tag="input_json_delta", tag_field="type", gc=False):
    """``{"type":"input_json_delta","partial_json":...}``: a piece of a streamed tool input."""

    partial_json: str


class SignatureDelta(msgspec.Struct, tag="signature_delta", tag_field="type", gc=False):
    """``{"type":"signature_delta",...}``: carries nothing the events use."""


class BlockDelta(msgspec.Struct, tag="content_block_delta", tag_field="type", gc=False):
    """The raw API event ``content_block_delta``."""

    index: int
    delta: Union[TextDeltaBody, ThinkingDeltaBody, JsonDelta, SignatureDelta]


def typed_loader(prefix: bytes, decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """A ``line_loader``: ``(decode(line), line)`` for a line that starts with ``prefix`` and decodes; else orjson.

    ``decode`` is a msgspec decoder's ``decode``.  The loader raises
    ``orjson.JSONDecodeError`` (a ``ValueError``) for a line orjson refuses, so
    that the framing's lenient path takes it.
    """
    loads = orjson.loads
    error = msgspec.DecodeError  # ValidationError is a subclass

    def load_line(line: bytes) -> Any:
        if line.startswith(prefix):
            try:
                return (decode(line), line)
            except error:
                pass
        return loads(line)

    return load_line


#: ``(BlockDelta, line)`` for a content-block delta line msgspec accepts, else the parsed JSON.
#: The agent writes these keys first (as every awp-jsonl CLI seen does); a line that
#: starts otherwise is parsed generically without trying.
load_line = typed_loader(b'{"type":"content_block_delta",', msgspec.json.Decoder(BlockDelta).decode)
