"""Host-side pieces of ACP's prompt turn: the prompt's blocks, its ending, and the permission requests within it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.dialect import DocumentBlock, ImageBlock, TextBlock, Turn
from agentrt.errors import AgentrtError
from agentrt.events import Event, TurnCompleted, TurnFailed

from ._rpc import STOP_REASON_CODES, meta_usage, rpc_error_code, rpc_message, usage_of

__all__ = ["can_use_tool", "permission_outcome", "prompt_blocks", "terminal_event"]


def prompt_blocks(turn: Turn, caps: Mapping[str, Any], *, check: bool) -> list[dict[str, Any]]:
    """The turn's content as ACP prompt blocks; with ``check``, only what ``caps`` (promptCapabilities) allow.

    Raises ``unsupported_content_block`` for a block ACP (or the agent) cannot take.
    """
    out: list[dict[str, Any]] = []
    for n, block in enumerate(turn.content):
        if isinstance(block, TextBlock):
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            if check and caps.get("image") is not True:
                raise AgentrtError("unsupported_content_block", "the agent does not accept images")
            out.append({"type": "image", "mimeType": block.media_type, "data": block.data})
        elif isinstance(block, DocumentBlock):
            if check and caps.get("embeddedContext") is not True:
                raise AgentrtError("unsupported_content_block", "the agent does not accept embedded resources")
            resource = {"uri": f"agentrt:document/{n}", "mimeType": block.media_type, "blob": block.data}
            out.append({"type": "resource", "resource": resource})
        else:
            raise AgentrtError("unsupported_content_block", f"ACP cannot carry a {type(block).__name__}")
    return out


def terminal_event(result: Any, error: Any, obj: dict[str, Any], session_id: str | None) -> Event:
    """The terminal event of the ``session/prompt`` response ``obj`` (its ``result`` or ``error``)."""
    if error is not None:
        return TurnFailed(code=rpc_error_code(error), message=rpc_message(error), raw=obj)
    reason = result.get("stopReason")
    usage = usage_of(result.get("usage")) or meta_usage(result.get("_meta"))
    if reason == "end_turn":
        return TurnCompleted(session_id=session_id, usage=usage, raw=obj)
    code = STOP_REASON_CODES.get(reason) if isinstance(reason, str) else None
    if code is None:
        return TurnFailed(code="unknown_stop_reason", message=f"the agent stopped: {reason!r}", usage=usage, raw=obj)
    return TurnFailed(code=code, message=f"the agent stopped the turn ({reason})", usage=usage, raw=obj)


def can_use_tool(params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``can_use_tool`` request body for a ``session/request_permission``'s ``params``.

    The tool's name is the call's ``title`` (Gemini CLI puts the command there),
    else its ``kind``; its input the call's ``rawInput`` when an object.
    """
    call = params.get("toolCall")
    call = call if isinstance(call, dict) else {}
    name = call.get("title") or call.get("kind") or "tool"
    raw_input = call.get("rawInput")
    return {
        "tool_name": name if isinstance(name, str) else "tool",
        "input": raw_input if isinstance(raw_input, dict) else {},
        "tool_call": call,
        "options": params.get("options"),
    }


def permission_outcome(params: Any, allow: bool) -> dict[str, Any]:
    """The ``outcome`` answering a permission request: the offered option of the kind the decision asks for.

    ``allow_once`` then ``allow_always`` for an allow; ``reject_once`` then
    ``reject_always`` for a denial; ``cancelled`` when the agent offered none.
    """
    kinds = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")
    options = params.get("options") if isinstance(params, dict) else None
    for kind in kinds:
        chosen = next((o.get("optionId") for o in options or () if isinstance(o, dict) and o.get("kind") == kind), None)
        if chosen is not None:
            return {"outcome": "selected", "optionId": chosen}
    return {"outcome": "cancelled"}
