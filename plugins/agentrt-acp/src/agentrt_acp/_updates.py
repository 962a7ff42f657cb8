"""``session/update`` notifications to agentrt events (the host side's table, docs/acp.md).

Each update kind has one mapping; the notification itself rides along as
``raw``, so nothing is lost when an event keeps only part of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from agentrt.dialect import make_text_delta
from agentrt.events import Diagnostic, Event, RawEvent, Status, ThinkingDelta, ToolResult, ToolUse
from agentrt.labels import MAX_LABEL

__all__ = ["UpdateDecoder", "MAX_TOOL_CONTENT"]

#: A tool call's reported content is cut to this many bytes of JSON (its text kept, marked truncated).
MAX_TOOL_CONTENT = 64 * 1024

_DONE = frozenset({"completed", "failed"})
_MAX_ANNOUNCED = 1024


def _label(text: Any, fallback: str) -> str:
    value = text if isinstance(text, str) and text.strip() else fallback
    value = " ".join(value.split())
    return value if len(value) <= MAX_LABEL else value[: MAX_LABEL - 3] + "..."


def _bounded(content: Any) -> Any:
    try:
        size = len(orjson.dumps(content))
    except TypeError:
        return None
    if size <= MAX_TOOL_CONTENT:
        return content
    texts: list[str] = []
    for item in content if isinstance(content, list) else [content]:
        inner = item.get("content") if isinstance(item, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            texts.append(inner["text"])
    return {"truncated": True, "bytes": size, "text": "\n".join(texts)[: MAX_TOOL_CONTENT // 4]}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _context_status(update: Mapping[str, Any], raw: Any) -> Event:
    """``usage_update``: the tokens in the session's context window (and its cost), as a status."""
    used, size = _int(update.get("used")), _int(update.get("size"))
    cost = update.get("cost") if isinstance(update.get("cost"), dict) else None
    if used is None:
        return RawEvent(name="usage_update", raw=raw)
    label = f"context: {used} of {size} tokens" if size else f"context: {used} tokens"
    return Status(kind="context", label=label, detail={"used": used, "size": size, "cost": cost}, raw=raw)


def _done(update: Mapping[str, Any]) -> bool:
    status = update.get("status")
    return isinstance(status, str) and status in _DONE


class UpdateDecoder:
    """Stateful: text runs get a new block index after anything that is not text."""

    def __init__(self) -> None:
        #: The block index of the current (or next) text run.
        self.index = 0
        #: A text run is open (the next non-text update starts a new block).
        self.in_text = False
        #: Replayed history (``session/load``) is not reply text while this is set.
        self.replaying = False
        # Tool calls announced (a bounded, ordered set): an update for another is announced first.
        self._announced: dict[str, None] = {}

    def decode(self, update: Mapping[str, Any], raw: Any) -> list[Event]:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" or kind == "agent_thought_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
                text = content["text"]
                if self.replaying:
                    return [RawEvent(name=f"replay/{kind}", raw=raw)]
                if not text:  # some agents open a message with an empty chunk
                    return [RawEvent(name=kind, raw=raw)]
                if kind == "agent_thought_chunk":
                    return [ThinkingDelta(text=text, index=self.index, raw=raw)]
                self.in_text = True
                return [make_text_delta(text, self.index, raw)]
            self._break()
            kind_name = content.get("type") if isinstance(content, dict) else None
            return [RawEvent(name=f"{kind}/{kind_name if isinstance(kind_name, str) else 'unknown'}", raw=raw)]
        self._break()
        if kind == "user_message_chunk":
            return [RawEvent(name="replay/user_message_chunk" if self.replaying else kind, raw=raw)]
        if kind == "tool_call":
            return self._tool_call(update, raw)
        if kind == "tool_call_update":
            return self._tool_update(update, raw)
        if kind == "plan":
            entries = update.get("entries")
            entries = entries if isinstance(entries, list) else []
            done = sum(1 for e in entries if isinstance(e, dict) and e.get("status") == "completed")
            return [
                Status(kind="plan", label=f"plan: {done}/{len(entries)} done", detail={"entries": entries}, raw=raw)
            ]
        if kind == "current_mode_update":
            mode = update.get("currentModeId")
            return [Status(kind="mode", label=_label(mode, "mode changed"), detail={"mode": mode}, raw=raw)]
        if kind == "usage_update":
            return [_context_status(update, raw)]
        if isinstance(kind, str) and kind:
            # available_commands_update, session_info_update, config_option_update, future kinds
            return [RawEvent(name=kind, raw=raw)]
        return [Diagnostic(code="unexpected_output_shape", detail="session/update without sessionUpdate", raw=raw)]

    def _break(self) -> None:
        if self.in_text:
            self.in_text = False
            self.index += 1

    def _tool_call(self, update: Mapping[str, Any], raw: Any) -> list[Event]:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            return [Diagnostic(code="unexpected_output_shape", detail="tool_call without toolCallId", raw=raw)]
        events: list[Event] = [self._announce(call_id, update, raw)]
        if _done(update):
            events.append(self._result(call_id, update, raw))
        return events

    def _tool_update(self, update: Mapping[str, Any], raw: Any) -> list[Event]:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            return [Diagnostic(code="unexpected_output_shape", detail="tool_call_update without toolCallId", raw=raw)]
        # Gemini CLI asks permission for a call it never announced, then sends only its updates:
        # the first update announces it, so every tool result follows its tool use.
        first: list[Event] = [] if call_id in self._announced else [self._announce(call_id, update, raw)]
        if _done(update):
            return [*first, self._result(call_id, update, raw)]
        status = update.get("status")
        return [
            *first,
            Status(
                kind="tool_call_update",
                label=_label(update.get("title"), status if isinstance(status, str) else "tool call updated"),
                detail={"toolCallId": call_id, "status": status if isinstance(status, str) else None},
                raw=raw,
            )
        ]

    def _announce(self, call_id: str, update: Mapping[str, Any], raw: Any) -> ToolUse:
        self._announced[call_id] = None
        if len(self._announced) > _MAX_ANNOUNCED:
            del self._announced[next(iter(self._announced))]
        kind = update.get("kind")
        raw_input = update.get("rawInput")
        return ToolUse(
            id=call_id,
            name=kind if isinstance(kind, str) and kind else "other",
            input=raw_input if isinstance(raw_input, dict) else {},
            summary=_label(update.get("title"), "Using a tool"),
            raw=raw,
        )

    def _result(self, call_id: str, update: Mapping[str, Any], raw: Any) -> ToolResult:
        content = update.get("content")
        if content is None:
            content = update.get("rawOutput")
        return ToolResult(
            tool_use_id=call_id, content=_bounded(content), is_error=update.get("status") == "failed", raw=raw
        )
