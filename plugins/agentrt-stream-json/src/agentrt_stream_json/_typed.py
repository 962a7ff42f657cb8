"""Typed first parse of the stream-json lines: deltas, complete messages, tool results, results.

The same idea, and the same exactness argument, as the typed parse of the
shared Anthropic wire module (``agentrt_awp_jsonl.anthropic``), whose delta
structs this reuses: msgspec decodes a line straight into small structs that
hold only what the events use, and checks the JSON syntax of every other value
without building it (session ids, uuids, models, usage details of complete
messages; not their UTF-8, which no event holds: ``raw`` parses the kept line
with the framing's rules).  A line
msgspec refuses, or whose shape the structs do not cover (an unknown content
block, a value of another JSON type), is parsed by orjson as before; so is a
line whose rare branch needs the whole object (a failed result, an API error
message): the host codec parses the kept line then, with the framing's rules.

Tool inputs and tool results, most of the bytes of the lines that carry them,
are validated but kept as bytes (``msgspec.Raw``, a view of the line): the
events hold them as :class:`agentrt.dialect.JsonFragment` and parse them on
first read, with the framing's rules, so they read exactly as the plain
parse gives them.  A tool's label reads only the keys it needs
(:class:`ToolArgs`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, Union

import msgspec
import orjson

from agentrt.lowlevel import parse_fragment
from agentrt_awp_jsonl.anthropic import (
    BlockDelta,
    Int64,
    JsonDelta,
    TextDeltaBody,
    ThinkingDeltaBody,
)

__all__ = [
    "AssistantLine",
    "BlockDelta",
    "BlockStart",
    "BlockStop",
    "JsonDelta",
    "MessageDelta",
    "MessageStart",
    "MessageStop",
    "RateLimitLine",
    "ResultLine",
    "StreamDelta",
    "TextBlock",
    "TextDeltaBody",
    "ThinkingBlock",
    "ThinkingDeltaBody",
    "ToolUseBlock",
    "UserLine",
    "ToolArgs",
    "decode_typed_line",
    "loads_raw",
]


class _MessageHead(msgspec.Struct, gc=False):
    id: Union[str, None] = None


class MessageStart(msgspec.Struct, tag="message_start", tag_field="type", gc=False):
    """A wrapped ``message_start``: only the message's id is read."""

    message: Union[_MessageHead, None] = None


class _BlockHead(msgspec.Struct, gc=False):
    type: Union[str, None] = None
    id: Union[str, None] = None
    name: Union[str, None] = None


class BlockStart(msgspec.Struct, tag="content_block_start", tag_field="type", gc=False):
    """A wrapped ``content_block_start``: a tool_use block's id and name are read."""

    index: Union[Int64, None] = None
    content_block: Union[_BlockHead, None] = None


class BlockStop(msgspec.Struct, tag="content_block_stop", tag_field="type", gc=False):
    """A wrapped ``content_block_stop``."""

    index: Union[Int64, None] = None


class MessageDelta(msgspec.Struct, tag="message_delta", tag_field="type", gc=False):
    """A wrapped ``message_delta`` (nothing in it makes an event)."""


class MessageStop(msgspec.Struct, tag="message_stop", tag_field="type", gc=False):
    """A wrapped ``message_stop`` (nothing in it makes an event)."""


class StreamDelta(msgspec.Struct, tag="stream_event", tag_field="type", gc=False):
    """A ``stream_event`` line wrapping a raw API event of a kind the host reads (other keys are skipped).

    Named for the hot case: most are content-block deltas.  A value of another
    JSON type where a field is read (a message id that is a number, an index
    that is a string) fails the decoding: the line takes the general path.
    """

    # The delta is awp-jsonl's bare event, wrapped: a member of a tagged union, so an
    # event without "type" is none of them.
    event: Union[BlockDelta, MessageStart, BlockStart, BlockStop, MessageDelta, MessageStop]
    api_message_id: Union[str, None] = None


class TextBlock(msgspec.Struct, tag="text", tag_field="type", gc=False):
    """A complete ``text`` content block."""

    text: str


class ThinkingBlock(msgspec.Struct, tag="thinking", tag_field="type", gc=False):
    """A complete ``thinking`` content block (its signature is skipped)."""

    thinking: str


class ToolUseBlock(msgspec.Struct, tag="tool_use", tag_field="type", gc=False):
    """A complete ``tool_use`` block; its input is kept as bytes (the event parses it on first read)."""

    id: Union[str, None] = None
    name: Union[str, None] = None
    input: msgspec.Raw = msgspec.Raw()


class _AssistantMessage(msgspec.Struct, gc=False):
    content: list[Union[TextBlock, ThinkingBlock, ToolUseBlock]]
    id: Union[str, None] = None


class AssistantLine(msgspec.Struct, tag="assistant", tag_field="type", gc=False):
    """An ``assistant`` line whose content is a list of text, thinking and tool_use blocks."""

    message: _AssistantMessage
    # An API error message (a string here) takes the general path.
    error: None = None


class _ToolResultBlock(msgspec.Struct, gc=False):
    # A plain field, not a tag: msgspec does not require the tag of a lone
    # tagged struct, and a block without "type" is no tool result.
    type: Literal["tool_result"]
    tool_use_id: Union[str, None] = None
    # Of any JSON type, kept as bytes: the event parses it on first read.
    content: msgspec.Raw = msgspec.Raw()
    is_error: Union[bool, None] = None


class _UserMessage(msgspec.Struct, gc=False):
    content: list[_ToolResultBlock]


class UserLine(msgspec.Struct, tag="user", tag_field="type", gc=False):
    """A ``user`` line carrying only ``tool_result`` blocks."""

    message: _UserMessage


class ResultLine(msgspec.Struct, tag="result", tag_field="type", gc=False):
    """A ``result`` line: the values a completed turn's event reads (durations, costs, denials skipped)."""

    subtype: Union[str, None] = None
    is_error: Union[bool, None] = None
    result: Union[str, None] = None
    session_id: Union[str, None] = None
    usage: msgspec.Raw = msgspec.Raw()


class _RateLimitInfo(msgspec.Struct, gc=False):
    status: Union[str, None] = None


class RateLimitLine(msgspec.Struct, tag="rate_limit_event", tag_field="type", gc=False):
    """A ``rate_limit_event`` line (only its status is read)."""

    rate_limit_info: Union[_RateLimitInfo, None] = None


# One decoder for every typed line kind: msgspec dispatches on the "type" tag
# itself, in C, wherever the key is.  A line of another type (or a
# ``stream_event`` of another event) fails at once or partway and is parsed by
# orjson; measured against a prefix check and one decoder per kind, this saves
# about a tenth of the typed parse's time on deltas and on the mix alike.
_decode_line = msgspec.json.Decoder(Union[StreamDelta, AssistantLine, UserLine, ResultLine, RateLimitLine]).decode
#: One line into the struct of its kind; raises ``msgspec.DecodeError`` for any other line.
decode_typed_line = _decode_line
_decode_args = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_loads = orjson.loads
_error = msgspec.DecodeError  # ValidationError is a subclass
_ABSENT: Any = object()


def loads_raw(raw: msgspec.Raw) -> Any:
    """The value of a kept JSON fragment, parsed by orjson (``None`` when the key was absent).

    Raises ``ValueError`` for what orjson refuses (a >64-bit integer, invalid
    UTF-8, a lone surrogate): the caller then parses the whole line as the
    framing does, so the event is the one of the plain parse.
    """
    return _loads(memoryview(raw)) if raw else None


class ToolArgs(Mapping[str, Any]):
    """A kept tool input as a read-only mapping whose values are parsed only when read.

    What :func:`agentrt.labels.tool_label` sees: it reads one or two keys of an
    input that may hold a whole file.  A fragment that is not a JSON object
    (or that msgspec will not split) reads as the plain parse's mapping.
    """

    __slots__ = ("_fragment", "_keys")

    def __init__(self, fragment: msgspec.Raw) -> None:
        self._fragment = fragment
        self._keys: Mapping[str, Any] | None = None

    def _split(self) -> Mapping[str, Any]:
        keys = self._keys
        if keys is None:
            fragment = self._fragment
            try:
                keys = _decode_args(fragment) if bytes(memoryview(fragment)[:1]) == b"{" else {}
            except (_error, RecursionError):
                # Keys msgspec does not build as the framing would (invalid UTF-8): parse it all.
                value = parse_fragment(fragment)
                keys = {k: _Parsed(v) for k, v in value.items()} if type(value) is dict else {}
            self._keys = keys
        return keys

    def __getitem__(self, key: str) -> Any:
        value = self._split()[key]
        return value.value if type(value) is _Parsed else parse_fragment(value)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` parsed, else ``default`` (what a label reads: no KeyError raised and caught)."""
        value = self._split().get(key, _ABSENT)
        if value is _ABSENT:
            return default
        return value.value if type(value) is _Parsed else parse_fragment(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._split())

    def __len__(self) -> int:
        return len(self._split())


class _Parsed:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value
