"""Typed first parse of the ACP hot line: a ``session/update`` text ``agent_message_chunk``.

Most lines of a streamed reply are these.  msgspec decodes one straight into
small structs (skipping, but still validating, every field no event uses)
instead of building four dicts; the event keeps the line's bytes as ``raw``.
A line is taken only when msgspec accepts it whole, else it is parsed by
orjson as usual, so the events are the same either way (``check_dialect``
clause 9 and the codec tests check it).
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

__all__ = ["ChunkLine", "load_line"]


class _Text(msgspec.Struct, tag="text", tag_field="type", gc=False):
    text: str


class _Chunk(msgspec.Struct, tag="agent_message_chunk", tag_field="sessionUpdate", gc=False):
    content: _Text


class _Params(msgspec.Struct, gc=False):
    sessionId: str
    update: _Chunk


class ChunkLine(msgspec.Struct, gc=False):
    """A ``session/update`` notification carrying a text message chunk (other keys skipped)."""

    method: str
    params: _Params
    # A request id would make it a malformed request, not a notification: the general path decides.
    id: Any = msgspec.UNSET


_PREFIX = b'{"jsonrpc":"2.0","method":"session/update",'
_decode = msgspec.json.Decoder(ChunkLine).decode
_loads = orjson.loads
_error = msgspec.DecodeError


def load_line(line: bytes) -> Any:
    """``(ChunkLine, line)`` for a text-chunk line msgspec accepts, else the parsed JSON (orjson's errors)."""
    if line.startswith(_PREFIX):
        try:
            return (_decode(line), line)
        except _error:
            pass
    return _loads(line)
