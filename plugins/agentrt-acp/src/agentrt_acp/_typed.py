"""Typed first parse of the ACP hot line: a ``session/update`` text ``agent_message_chunk``.

Most lines of a streamed reply are these.  msgspec decodes one straight into
small structs (skipping, but still validating, every field no event uses)
instead of building four dicts; the event keeps the line's bytes as ``raw``.
:func:`decode_text_chunks` (the host codec's ``decode_lines``) takes a line
only when it starts with :data:`CHUNK_PREFIX` and msgspec accepts it whole;
any other line goes to the framing's plain parse, so the events are the same
either way (``check_dialect`` clause 9 and the codec tests check it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from agentrt.dialect import text_delta_slots
from agentrt.events import Event

from ._updates import UpdateDecoder

__all__ = ["ChunkLine", "CHUNK_PREFIX", "decode_chunk_line", "decode_text_chunks"]


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


class _Session(Protocol):
    @property
    def session_id(self) -> str | None: ...


def decode_text_chunks(
    out: list[Event],
    lines: Sequence[bytes],
    general: Callable[[bytes], Sequence[Event]],
    updates: UpdateDecoder,
    session: _Session,
) -> list[Event]:
    """``out`` extended with the events of one chunk's ``lines``, parsed and decoded in one loop.

    A text-chunk notification msgspec takes becomes a ``TextDelta`` at once,
    its ``raw`` the line; every other line goes to ``general`` (the framing's
    parse, then the codec's ``decode``), as does a chunk line ``decode`` would
    not make a text delta of (empty text, a request id, another session than
    ``session.session_id``, replayed history).  Same events as ``decode`` on
    each line's plain parse.
    """
    append = out.append
    prefix = CHUNK_PREFIX
    decode_chunk = decode_chunk_line
    error = msgspec.DecodeError  # ValidationError is a subclass
    unset = msgspec.UNSET
    new, set_text, set_index, set_raw = text_delta_slots()
    # The state the typed path reads, in locals for the loop (read again after
    # every line the general path handles: a response may open the session or
    # end a replay, an update may start a new text block).
    sid, replaying, index = session.session_id, updates.replaying, updates.index
    for line in lines:
        if line.startswith(prefix) and not replaying:
            try:
                typed = decode_chunk(line)
            except (error, RecursionError):  # msgspec's nesting limit: orjson refuses such a line too
                pass
            else:
                params = typed.params
                text = params.update.content.text
                # A duplicate "method" key later in the line wins, as in the plain parse.
                if (
                    text
                    and typed.id is unset
                    and typed.method == "session/update"
                    and (sid is None or params.sessionId == sid)
                ):
                    updates.in_text = True
                    event = new()
                    set_text(event, text)
                    set_index(event, index)
                    set_raw(event, line)
                    append(event)
                    continue
        out.extend(general(line))
        sid, replaying, index = session.session_id, updates.replaying, updates.index
    return out
