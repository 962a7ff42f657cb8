"""stream-json host side: complete messages (``assistant``, ``user``, ``result`` lines).

A part of :class:`agentrt_stream_json._host.StreamJsonHostCodec`, sharing its
:class:`~agentrt_stream_json._host_state.StreamState` with the streamed deltas
(:mod:`agentrt_stream_json._host_stream`): a complete ``assistant`` line adds
only what the stream did not already carry, and a ``result`` ends the turn.
Parsed objects and lines decoded typed alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentrt.dialect import JsonFragment
from agentrt.events import (
    Diagnostic,
    Event,
    RawEvent,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.labels import tool_label
from agentrt.lowlevel import parse_line
from agentrt_awp_jsonl.anthropic import failure_code, failure_message, is_stable_code, tool_use_event

from ._host_state import StreamState
from ._typed import (
    AssistantLine,
    RateLimitLine,
    ResultLine,
    TextBlock,
    ThinkingBlock,
    ToolArgs,
    ToolUseBlock,
    UserLine,
    loads_raw,
)

__all__: list[str] = []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class CompleteMessages:
    """Complete messages: what the stream did not carry, tool calls once, the turn's end.

    ``decode(obj)`` is the codec's (a typed line the structs cannot carry
    whole goes back to it parsed).
    """

    def __init__(self, state: StreamState, decode: Callable[[Any], Sequence[Event]]) -> None:
        self._state = state
        self._decode = decode

    # -- complete messages --------------------------------------------------
    def assistant(self, obj: dict[str, Any]) -> Sequence[Event]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return (RawEvent(name="assistant", raw=obj),)
        content = message.get("content")
        error = obj.get("error")
        if isinstance(error, str):
            # A synthetic message standing for an API error: not the model's
            # reply, so not text; the result that follows fails the turn.
            return (Status(kind="api_error", label=error[:80], detail=_api_error_detail(obj, content), raw=obj),)
        msg = message.get("id")
        out: list[Event] = []
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return (RawEvent(name="assistant", raw=obj),)
        for position, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" or btype == "thinking":
                text = block.get(btype)
                if isinstance(text, str) and text:
                    out.extend(self._unstreamed(btype, msg, position, text, obj))
            elif btype == "tool_use":
                tool_id = block.get("id")
                if isinstance(tool_id, str) and tool_id in self._state.tools_emitted:
                    continue
                event = tool_use_event(obj, block)
                if event.id:
                    self._state.tools_emitted.add(event.id)
                out.append(event)
            else:
                out.append(RawEvent(name=f"assistant/{btype}" if isinstance(btype, str) else "assistant", raw=obj))
        return out if out else (RawEvent(name="assistant", raw=obj),)

    def _unstreamed(self, kind: str, msg: Any, position: int, text: str, obj: Any) -> list[Event]:
        cls = TextDelta if kind == "text" else ThinkingDelta
        blocks = self._state.streamed.get((kind, msg))
        if not blocks:
            return [cls(text=text, index=position, raw=obj)]
        # The complete block matches the first streamed block not yet matched.
        index = next(iter(blocks))
        streamed = "".join(blocks.pop(index))
        if text == streamed:
            return []
        if text.startswith(streamed):
            return [cls(text=text[len(streamed) :], index=index, raw=obj)]
        return [
            Diagnostic(
                code="stream_text_mismatch",
                detail=f"complete {kind} block differs from what was streamed",
                raw=obj,
            )
        ]

    def result(self, obj: dict[str, Any]) -> Sequence[Event]:
        self._state.end_turn()
        subtype = obj.get("subtype")
        usage_obj = obj.get("usage")
        usage = Usage.from_mapping(usage_obj) if isinstance(usage_obj, dict) else None
        failed = obj.get("is_error") is True or (isinstance(subtype, str) and subtype.startswith("error"))
        if failed:
            return (TurnFailed(code=_failure_code(obj), message=failure_message(obj), usage=usage, raw=obj),)
        result = obj.get("result")
        return (
            TurnCompleted(
                session_id=_str(obj.get("session_id")),
                usage=usage,
                result=result if isinstance(result, str) else None,
                raw=obj,
            ),
        )

    # -- complete lines decoded typed ---------------------------------------
    def typed_line(self, typed: Any, line: bytes) -> Sequence[Event]:
        # The line kinds other than deltas, decoded typed: the same events as
        # the handlers of the parsed object.  What the structs leave out (a
        # failed result, a rate limit that limits) and a kept fragment orjson
        # refuses go to the general path with the line parsed as the framing
        # parses it; every fragment is parsed before any state changes.
        kind = type(typed)
        try:
            if kind is AssistantLine:
                return self._typed_assistant(typed, line)
            if kind is UserLine:
                results = typed.message.content
                if not results:
                    return (RawEvent(name="user", raw=line),)
                return [
                    ToolResult(
                        tool_use_id=block.tool_use_id or "",
                        content=JsonFragment(block.content),
                        is_error=block.is_error is True,
                        raw=line,
                    )
                    for block in results
                ]
            if kind is ResultLine:
                subtype = typed.subtype
                if not (typed.is_error is True or (subtype is not None and subtype.startswith("error"))):
                    usage_obj = loads_raw(typed.usage)
                    self._state.end_turn()
                    return (
                        TurnCompleted(
                            session_id=typed.session_id,
                            usage=Usage.from_mapping(usage_obj) if isinstance(usage_obj, dict) else None,
                            result=typed.result,
                            raw=line,
                        ),
                    )
            elif kind is RateLimitLine:
                info = typed.rate_limit_info
                if info is None or not info.status or info.status == "allowed":
                    return (RawEvent(name="rate_limit_event", raw=line),)
        except Exception:
            pass
        return self._decode(parse_line(line))

    def _typed_assistant(self, typed: AssistantLine, line: bytes) -> Sequence[Event]:
        content = typed.message.content
        msg = typed.message.id
        out: list[Event] = []
        for position, block in enumerate(content):
            # ``type(block) is X`` per branch: narrowed for mypy, half the cost of ``match``
            # on classes (bench/dispatch.py).
            if type(block) is TextBlock:
                if block.text:
                    out.extend(self._unstreamed("text", msg, position, block.text, line))
            elif type(block) is ThinkingBlock:
                if block.thinking:
                    out.extend(self._unstreamed("thinking", msg, position, block.thinking, line))
            elif type(block) is ToolUseBlock:
                tool_id = block.id
                if tool_id is not None and tool_id in self._state.tools_emitted:
                    continue
                # As tool_use_event builds it, the input parsed on first read.
                name = block.name or "tool"
                fragment = block.input
                tool_input: Any = JsonFragment(fragment, mapping=True)  # reads as the parsed mapping
                out.append(
                    ToolUse(
                        id=tool_id or "",
                        name=name,
                        input=tool_input,
                        summary=tool_label(name, ToolArgs(fragment)),
                        raw=line,
                    )
                )
                if tool_id:
                    self._state.tools_emitted.add(tool_id)
        return out if out else (RawEvent(name="assistant", raw=line),)


def _failure_code(obj: Mapping[str, Any]) -> str:
    status = obj.get("api_error_status")
    if isinstance(status, int) and not isinstance(status, bool) and 0 <= status < 1000:
        return f"api_error_{status}"
    if isinstance(status, str) and status.isdigit() and len(status) <= 3:
        return f"api_error_{status}"
    reason = obj.get("terminal_reason")
    if is_stable_code(reason) and reason != "completed":
        return str(reason)
    code = failure_code(obj)
    # ``success`` is the real CLI's subtype of failed turns too: no code in it.
    return "cc_error" if code == "cc_success" else code


def _api_error_detail(obj: Mapping[str, Any], content: Any) -> dict[str, Any]:
    detail = {k: obj[k] for k in ("error", "api_error_status", "api_error_type") if k in obj}
    if isinstance(content, list):
        texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        if texts:
            detail["text"] = "\n".join(texts)
    return detail
