"""Agent side of awp-jsonl: what the reference agent CLI prints (see :mod:`agentrt_awp_jsonl.codec`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.dialect import AgentCodec, AgentInput
from agentrt.events import (
    Event,
    SessionStarted,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
)

from .anthropic import decode_user_input, init_object, tool_result_object, tool_use_block

__all__ = ["AwpAgentCodec"]


class AwpAgentCodec(AgentCodec):
    """Agent side of awp-jsonl: what the reference agent CLI prints.

    Text deltas are framed as raw ``content_block_start`` / ``_delta`` /
    ``_stop`` events: a block is opened before its first delta and closed
    before any other event (and at the terminal event).  Extra ``system/init``
    keys (``tools``, ``cwd``) come from the ``SessionStarted`` event's ``raw``
    mapping when it has them.
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._open: tuple[str, int] | None = None  # (block kind, index) of the open block

    def decode_input(self, obj: Any) -> AgentInput:
        """A :class:`Turn`, :class:`Shutdown` or :class:`InputError` for one input object."""
        return decode_user_input(obj)

    def _close(self, out: list[dict[str, Any]]) -> None:
        if self._open is not None:
            out.append({"type": "content_block_stop", "index": self._open[1]})
            self._open = None

    def _delta(self, kind: str, index: int, delta: dict[str, Any], out: list[dict[str, Any]]) -> None:
        if self._open != (kind, index):
            self._close(out)
            block: dict[str, Any] = (
                {"type": "text", "text": ""} if kind == "text" else {"type": "thinking", "thinking": ""}
            )
            out.append({"type": "content_block_start", "index": index, "content_block": block})
            self._open = (kind, index)
        out.append({"type": "content_block_delta", "index": index, "delta": delta})

    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """Output objects for one event (see the class docstring)."""
        out: list[dict[str, Any]] = []
        if isinstance(event, TextDelta):
            self._delta("text", event.index, {"type": "text_delta", "text": event.text}, out)
            return out
        if isinstance(event, ThinkingDelta):
            self._delta("thinking", event.index, {"type": "thinking_delta", "thinking": event.text}, out)
            return out
        self._close(out)
        if isinstance(event, SessionStarted):
            self.session_id = event.session_id
            out.append(init_object(event))
        elif isinstance(event, ToolUse):
            out.append(self._assistant_object(tool_use_block(event)))
        elif isinstance(event, ToolResult):
            out.append(tool_result_object(event, self.session_id))
        elif isinstance(event, TurnCompleted):
            out.append(self._success(event))
        elif isinstance(event, TurnFailed):
            out.append(self._failure(event))
        return out

    def _assistant_object(self, block: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "assistant", "message": {"role": "assistant", "content": [block]}}
        if self.session_id is not None:
            obj["session_id"] = self.session_id
        return obj

    def _success(self, event: TurnCompleted) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "result", "subtype": "success", "is_error": False}
        session_id = event.session_id or self.session_id
        if session_id is not None:
            obj["session_id"] = session_id
        if event.result is not None:
            obj["result"] = event.result
        if event.usage is not None:
            obj["usage"] = event.usage.to_dict()
        return obj

    def _failure(self, event: TurnFailed) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "result", "subtype": "error", "is_error": True}
        if self.session_id is not None:
            obj["session_id"] = self.session_id
        obj["result"] = event.code
        obj["errors"] = [event.message] if event.message else []
        if event.usage is not None:
            obj["usage"] = event.usage.to_dict()
        return obj
