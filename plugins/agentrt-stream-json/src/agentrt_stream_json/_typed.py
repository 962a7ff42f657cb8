"""Typed first parse of the stream-json hot line: a ``stream_event`` content-block delta.

The same idea, and the same exactness argument, as awp-jsonl's typed parse
(``agentrt_awp_jsonl.typed``), whose delta structs this reuses: the real CLI
wraps each raw API event in a ``stream_event`` line with a session id, a uuid
and the API message id, of which only the last is read.
"""

from __future__ import annotations

from typing import Union

import msgspec

from agentrt_awp_jsonl.typed import BlockDelta, JsonDelta, TextDeltaBody, ThinkingDeltaBody, typed_loader

__all__ = ["JsonDelta", "StreamDelta", "TextDeltaBody", "ThinkingDeltaBody", "load_line"]


class StreamDelta(msgspec.Struct, tag="stream_event", tag_field="type", gc=False):
    """A ``stream_event`` line wrapping a content-block delta (other keys are skipped)."""

    event: BlockDelta
    api_message_id: Union[str, None] = None


#: ``(StreamDelta, line)`` for a content-block delta line msgspec accepts, else the parsed JSON.
#: The CLI writes these keys first, in this order (JSON.stringify keeps insertion
#: order); a line that starts otherwise is parsed generically without trying.
load_line = typed_loader(
    b'{"type":"stream_event","event":{"type":"content_block_delta",', msgspec.json.Decoder(StreamDelta).decode
)
