"""stream-json host side: the streamed deltas (``stream_event`` lines), text deltas on the hot path.

A part of :class:`agentrt_stream_json._host.StreamJsonHostCodec`, which
holds it beside the complete messages (:mod:`agentrt_stream_json._host_messages`),
both sharing one :class:`~agentrt_stream_json._host_state.StreamState`:
:meth:`StreamedDeltas.decode_lines` inlines text-delta lines, the other raw
events record what was streamed so that the complete ``assistant`` line adds
only the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import orjson

from agentrt.dialect import text_delta_slots
from agentrt.events import Diagnostic, Event, RawEvent, TextDelta, ThinkingDelta, ToolUse
from agentrt.labels import tool_label

from ._host_state import KEEP_MESSAGES, StreamState
from ._typed import (
    BlockDelta,
    BlockStart,
    BlockStop,
    JsonDelta,
    MessageStart,
    StreamDelta,
    TextDeltaBody,
    ThinkingDeltaBody,
    decode_typed_line,
)

_decode_line = decode_typed_line
_DecodeError = msgspec.DecodeError  # ValidationError is a subclass

__all__: list[str] = []

_NO_EVENTS: tuple[Event, ...] = ()
# How many new streamed pieces of one block a chunk may leave before they are joined.
_JOIN_PIECES = 64
_KEEP_MESSAGES = KEEP_MESSAGES  # the retention bound, under the name the tests know


class StreamedDeltas:
    """Streamed raw events: text, thinking and tool-input deltas, message and block starts and stops.

    ``typed_line(typed, line)`` gives the events of a complete line the typed
    parse took (the complete messages' part).
    """

    def __init__(self, state: StreamState, typed_line: Callable[[Any, bytes], Sequence[Event]]) -> None:
        self._state = state
        self._typed_line = typed_line

    # -- streamed raw events -----------------------------------------------
    def bare_raw(self, obj: dict[str, Any]) -> Sequence[Event]:
        return self._raw_event(obj, obj)

    def stream_event(self, obj: dict[str, Any]) -> Sequence[Event]:
        ev = obj.get("event")
        if type(ev) is not dict:
            return (RawEvent(name="stream_event", raw=obj),)
        # Text deltas one object at a time take the general path; the per-chunk
        # hot path (decode_lines) inlines them.
        return self._raw_event(obj, ev)

    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        """Events for one chunk's lines, parsed and decoded in one loop (the host path's chunk-at-a-time path).

        Each line msgspec takes into one of the typed line kinds
        (:func:`~agentrt_stream_json._typed.decode_typed_line`'s) is decoded
        from its struct at once, text deltas inline; every other line goes to
        ``general`` (the framing's parse, then the codec's ``decode``).  Same
        events as ``decode`` on each line's plain parse.
        """
        out: list[Event] = []
        append = out.append
        decode_line = _decode_line
        error = _DecodeError
        new, set_text, set_index, set_raw = text_delta_slots()
        state = self._state
        message_id, text_msg, blocks = state.message_id, state.text_msg, state.text_blocks
        for line in lines:
            try:
                typed = decode_line(line)
            except (error, RecursionError):  # any other shape (msgspec's nesting limit too)
                out.extend(general(line))
                message_id, text_msg, blocks = state.message_id, state.text_msg, state.text_blocks
                continue
            if type(typed) is not StreamDelta:
                out.extend(self._typed_line(typed, line))
                message_id, text_msg, blocks = state.message_id, state.text_msg, state.text_blocks
                continue
            ev = typed.event
            if type(ev) is not BlockDelta:
                out.extend(self._typed_event(typed, ev, line))
                message_id = state.message_id
                continue
            delta = ev.delta
            if type(delta) is not TextDeltaBody:
                out.extend(self._typed_delta(typed, line))
                # A thinking delta may have let the oldest kept message go (see StreamState.blocks).
                text_msg, blocks = state.text_msg, state.text_blocks
                continue
            text = delta.text
            if not text:
                continue
            index = ev.index
            msg = typed.api_message_id or message_id
            if msg != text_msg:
                text_msg, blocks = msg, state.text_message(msg)
            parts = blocks.get(index)
            if parts is None:
                blocks[index] = [text]
            else:
                parts.append(text)
            # make_text_delta's work, inline: one call less per line.
            event = new()
            set_text(event, text)
            set_index(event, index)
            set_raw(event, line)
            append(event)
        if blocks:
            self._join_pieces(blocks)
        return out

    def _join_pieces(self, blocks: dict[int, list[str]]) -> None:
        # A long message keeps many small pieces per block until its complete line:
        # once a chunk leaves _JOIN_PIECES new ones, they become one string (the
        # concatenation is unchanged, only its pieces are fewer), so the pieces die
        # with their events and a reply of any length holds about its text.  Only
        # the pieces since the last join are joined: no text is copied twice.
        joined = self._state.joined
        if joined[0] is not blocks:
            joined = self._state.joined = (blocks, {})
        marks = joined[1]
        for index, parts in blocks.items():
            start = marks.get(index, 0)
            if start > len(parts):  # the block was taken and began again
                start = 0
            if len(parts) - start >= _JOIN_PIECES:
                parts[start:] = ["".join(parts[start:])]
                marks[index] = start + 1

    def _typed_event(self, typed: Any, ev: Any, line: bytes) -> Sequence[Event]:
        # The other raw events decoded typed, as _raw_event handles them parsed.
        kind = type(ev)
        if kind is MessageStart:
            if ev.message is not None:
                self._state.message_id = ev.message.id
        elif kind is BlockStart:
            block = ev.content_block
            if block is not None and block.type == "tool_use" and ev.index is not None:
                msg = typed.api_message_id or self._state.message_id
                self._state.tool_blocks[(msg, ev.index)] = [block.id or "", block.name or "tool", []]
        elif kind is BlockStop and ev.index is not None:
            msg = typed.api_message_id or self._state.message_id
            pending = self._state.tool_blocks.pop((msg, ev.index), None)
            if pending is not None and pending[0] not in self._state.tools_emitted:
                return self._streamed_tool(line, pending)
        return _NO_EVENTS  # message_delta, message_stop: the result's usage counts the turn

    def _typed_delta(self, typed: Any, line: bytes) -> Sequence[Event]:
        # The other delta kinds, as _raw_event handles them.
        ev = typed.event
        delta = ev.delta
        msg = typed.api_message_id or self._state.message_id
        if type(delta) is ThinkingDeltaBody:
            text = delta.thinking
            if not text:
                return _NO_EVENTS
            blocks = self._state.blocks("thinking", msg)
            blocks.setdefault(ev.index, []).append(text)
            return (ThinkingDelta(text=text, index=ev.index, raw=line),)
        if type(delta) is JsonDelta:
            block = self._state.tool_blocks.get((msg, ev.index))
            if block is not None:
                block[2].append(delta.partial_json)
        return _NO_EVENTS  # input_json_delta, signature_delta

    def _raw_event(self, obj: dict[str, Any], ev: dict[str, Any]) -> Sequence[Event]:
        etype = ev.get("type")
        if etype == "content_block_delta":  # the hot path: most lines are text deltas
            delta = ev.get("delta")
            index = ev.get("index")
            if type(index) is not int:
                index = 0
            if type(delta) is dict:
                dtype = delta.get("type")
                if dtype == "text_delta":
                    text = delta.get("text")
                    if type(text) is str:
                        if not text:
                            return _NO_EVENTS
                        self._record("text", obj, index, text)
                        return (TextDelta(text=text, index=index, raw=obj),)
                elif dtype == "input_json_delta":
                    piece = delta.get("partial_json")
                    block = self._state.tool_blocks.get((self._state.msg(obj), index))
                    if block is not None and type(piece) is str:
                        block[2].append(piece)
                    return _NO_EVENTS
                elif dtype == "thinking_delta":
                    text = delta.get("thinking")
                    if type(text) is str:
                        if not text:
                            return _NO_EVENTS
                        self._record("thinking", obj, index, text)
                        return (ThinkingDelta(text=text, index=index, raw=obj),)
                elif dtype == "signature_delta":
                    return _NO_EVENTS
            return (RawEvent(name="stream_event/content_block_delta", raw=obj),)
        if etype == "message_start":
            message = ev.get("message")
            if isinstance(message, dict):
                mid = message.get("id")
                # The id keys what later deltas stream: an array or object (no real CLI's) is no id,
                # rather than a key no later line could be filed under.
                self._state.message_id = None if isinstance(mid, (list, dict)) else mid
            return _NO_EVENTS
        if etype == "content_block_start":
            block = ev.get("content_block")
            index = ev.get("index")
            if isinstance(block, dict) and block.get("type") == "tool_use" and type(index) is int:
                tool_id = block.get("id")
                name = block.get("name")
                self._state.tool_blocks[(self._state.msg(obj), index)] = [
                    tool_id if isinstance(tool_id, str) else "",
                    name if isinstance(name, str) and name else "tool",
                    [],
                ]
            return _NO_EVENTS
        if etype == "content_block_stop":
            index = ev.get("index")
            pending = self._state.tool_blocks.pop((self._state.msg(obj), index), None) if type(index) is int else None
            if pending is not None and pending[0] not in self._state.tools_emitted:
                return self._streamed_tool(obj, pending)
            return _NO_EVENTS
        if etype == "message_delta" or etype == "message_stop":
            # Not a terminal here, and its usage is per API call: the result's counts the turn.
            return _NO_EVENTS
        return (RawEvent(name=f"stream_event/{etype}" if isinstance(etype, str) else "stream_event", raw=obj),)

    def _record(self, kind: str, obj: dict[str, Any], index: int, text: str) -> None:
        blocks = self._state.blocks(kind, self._state.msg(obj))
        parts = blocks.get(index)
        if parts is None:
            blocks[index] = [text]
        else:
            parts.append(text)

    def _streamed_tool(self, obj: Any, pending: list[Any]) -> Sequence[Event]:
        tool_id, name, pieces = pending
        source = "".join(pieces)
        events: list[Event] = []
        tool_input: Any = {}
        if source.strip():
            try:
                tool_input = orjson.loads(source)
            except orjson.JSONDecodeError:
                events.append(
                    Diagnostic(
                        code="invalid_tool_input_json",
                        detail=f"streamed input of {name} is not JSON",
                        raw=obj,
                    )
                )
        if not isinstance(tool_input, dict):
            tool_input = {}
        if tool_id:
            self._state.tools_emitted.add(tool_id)
        events.append(ToolUse(id=tool_id, name=name, input=tool_input, summary=tool_label(name, tool_input), raw=obj))
        return events
