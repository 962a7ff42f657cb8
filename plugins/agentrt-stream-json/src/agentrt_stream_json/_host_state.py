"""stream-json host side: what the current turn streamed, shared by the codec's two halves.

One :class:`StreamState` per :class:`~agentrt_stream_json._host.StreamJsonHostCodec`,
held by both of its parts: the streamed deltas
(:mod:`agentrt_stream_json._host_stream`) record into it, and the complete
messages (:mod:`agentrt_stream_json._host_messages`) read from it what the
stream already carried, then clear it at the turn's end.
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []

#: No message cached for the hot path.
UNSET: Any = object()
# How many messages' streamed text (text and thinking counted apart) is kept for complete lines.
KEEP_MESSAGES = 64


class StreamState:
    """The current turn's streamed pieces, tool blocks and reported tool calls."""

    __slots__ = ("joined", "message_id", "streamed", "text_blocks", "text_msg", "tool_blocks", "tools_emitted")

    def __init__(self) -> None:
        #: The id of the message being streamed (its ``message_start``).
        self.message_id: Any = None
        #: (kind, message id) -> {block index: streamed pieces}, blocks in stream order.
        self.streamed: dict[tuple[str, Any], dict[int, list[str]]] = {}
        #: The text blocks of the message being streamed, cached for the hot path.
        self.text_msg: Any = UNSET
        self.text_blocks: dict[int, list[str]] = {}
        #: (blocks dict, {block index: pieces already joined}) for decode_lines' joins.
        self.joined: tuple[Any, dict[int, int]] = (None, {})
        #: (message id, block index) -> [tool id, name, input pieces] of a streamed tool_use block.
        self.tool_blocks: dict[tuple[Any, int], list[Any]] = {}
        #: Tool calls already reported (a complete line does not report them again).
        self.tools_emitted: set[str] = set()

    def msg(self, obj: dict[str, Any]) -> Any:
        """The message a parsed ``stream_event`` belongs to."""
        # The capture's CLI names the message on every stream_event; older
        # ones only in message_start.
        return obj.get("api_message_id") or self.message_id

    def blocks(self, kind: str, msg: Any) -> dict[int, list[str]]:
        """What message ``msg`` streamed of ``kind`` (``text``, ``thinking``), kept for its complete line."""
        # At most KEEP_MESSAGES are kept: a message's complete line comes before the next
        # message starts (every capture), so only a CLI that never sends complete lines
        # reaches the bound, and it then holds a few messages' text, not a turn's.
        streamed = self.streamed
        key = (kind, msg)
        blocks = streamed.get(key)
        if blocks is None:
            if len(streamed) >= KEEP_MESSAGES:
                oldest = streamed.pop(next(iter(streamed)))
                if oldest is self.text_blocks:  # the hot path's cached message went with it
                    self.text_msg, self.text_blocks = UNSET, {}
            blocks = streamed[key] = {}
        return blocks

    def text_message(self, msg: Any) -> dict[int, list[str]]:
        """Make ``msg`` the hot path's cached message; its text blocks."""
        # The message streamed before is kept until its complete line or the
        # turn's end: as one string per block, not one object per delta (a
        # third of the memory for short deltas).
        for index, parts in self.text_blocks.items():
            if len(parts) > 1:
                self.text_blocks[index] = ["".join(parts)]
        blocks = self.blocks("text", msg)
        self.text_msg, self.text_blocks = msg, blocks
        return blocks

    def end_turn(self) -> None:
        """The turn is over: forget what was streamed in it."""
        self.streamed.clear()
        self.text_msg, self.text_blocks = UNSET, {}
        self.tool_blocks.clear()
        self.tools_emitted.clear()
        self.message_id = None
