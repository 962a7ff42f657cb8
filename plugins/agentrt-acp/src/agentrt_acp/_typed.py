"""Typed first parse of the ACP hot line: a ``session/update`` text ``agent_message_chunk``.

Most lines of a streamed reply are these.  msgspec decodes one straight into
small structs (skipping, but still validating, every field no event uses)
instead of building four dicts; the event keeps the line's bytes as ``raw``.
The host codec's ``decode_lines`` takes a line only when it starts with
:data:`CHUNK_PREFIX` and msgspec accepts it whole; any other line goes to the
framing's plain parse, so the events are the same either way
(``check_dialect`` clause 9 and the codec tests check it).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["ChunkLine", "CHUNK_PREFIX", "decode_chunk_line"]


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


#: How a text-chunk notification starts as agents write it (these keys first); a line that
#: starts otherwise is parsed generically without trying.
CHUNK_PREFIX = b'{"jsonrpc":"2.0","method":"session/update",'

#: A text-chunk line into a :class:`ChunkLine`; raises ``msgspec.DecodeError`` for any other line.
decode_chunk_line = msgspec.json.Decoder(ChunkLine).decode
