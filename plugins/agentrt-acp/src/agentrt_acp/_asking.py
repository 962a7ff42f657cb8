"""Agent side of ACP: asking the client for a permission (``session/request_permission``).

The bridge hosts a CLI whose tool requests (stream-json ``can_use_tool``) go
through a permission policy; on the ACP agent side that policy is the client.
:class:`PermissionAsker` builds the request, reads the client's response and
turns the chosen option into a :class:`~agentrt.permissions.PermissionDecision`.
The options are ours, so their ids are their kinds; an ``allow_always`` answer
is remembered per tool name for the rest of the process, and said to be the
client's "always" (recorded ``by="user:always"``, as ``run`` records its ``a``).
"""

from __future__ import annotations

from typing import Any

from agentrt.labels import tool_label
from agentrt.permissions import PermissionDecision, PermissionRequest

from ._kinds import tool_kind

__all__ = ["PermissionAsker", "OPTIONS"]

#: The options offered with every request (id = kind).
OPTIONS: tuple[dict[str, str], ...] = (
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
)
_KINDS = {o["optionId"] for o in OPTIONS}


def _tool_call_id(request: PermissionRequest) -> str:
    """The hosted CLI's own id for the tool call: stream-json's ``tool_use_id``, ACP's ``toolCallId``."""
    raw = request.raw if isinstance(request.raw, dict) else {}
    body = raw.get("request")
    found = body.get("tool_use_id") if isinstance(body, dict) else None
    params = raw.get("params")
    call = params.get("toolCall") if isinstance(params, dict) else None
    if found is None and isinstance(call, dict):
        found = call.get("toolCallId")
    return found if isinstance(found, str) and found else request.request_id


def _kind(request: PermissionRequest) -> str:
    """The tool's ACP kind: a hosted ACP agent's own, else the one its tool name maps to."""
    raw = request.raw if isinstance(request.raw, dict) else {}
    params = raw.get("params")
    call = params.get("toolCall") if isinstance(params, dict) else None
    kind = call.get("kind") if isinstance(call, dict) else None
    return tool_kind(kind if isinstance(kind, str) and kind else request.tool_name)


def _title(request: PermissionRequest) -> str:
    """What the client shows: the bounded tool label ("Running: echo hi"), else the tool's name."""
    label = tool_label(request.tool_name, request.input)
    return (request.tool_name or "tool") if label == tool_label(None) else label


class PermissionAsker:
    """Open ``session/request_permission`` requests of one agent process, keyed by JSON-RPC id."""

    def __init__(self) -> None:
        self._next = 0
        self._open: dict[str, str] = {}  # JSON-RPC id -> tool name
        self._always: set[str] = set()

    def ask(self, session_id: str, request: PermissionRequest) -> tuple[str, dict[str, Any]] | PermissionDecision:
        """The request to send as ``(id, message)``, or the decision when ``allow_always`` already covers it."""
        if request.tool_name in self._always:
            return PermissionDecision(allow=True)
        self._next += 1
        rid = f"agentrt-permission-{self._next}"
        self._open[rid] = request.tool_name
        tool_call = {
            "toolCallId": _tool_call_id(request),
            "title": _title(request),
            "kind": _kind(request),
            "status": "pending",
            "rawInput": dict(request.input),
        }
        params = {"sessionId": session_id, "toolCall": tool_call, "options": [dict(o) for o in OPTIONS]}
        return rid, {"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": params}

    def answer(self, obj: Any) -> tuple[str, PermissionDecision, str] | None:
        """``(id, decision, by)`` when ``obj`` is the client's response to one of our requests, else ``None``.

        ``by`` is who decided, as ``agentrt logs --approvals`` records it: ``user:always`` for an
        ``allow_always`` answer (the words ``run`` records for its ``a`` answer), ``user`` otherwise.
        """
        if not isinstance(obj, dict) or "method" in obj:
            return None
        rid = obj.get("id")
        if not isinstance(rid, str) or rid not in self._open:
            return None
        tool = self._open.pop(rid)
        error = obj.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            denied = PermissionDecision(allow=False, message=f"the ACP client failed the request: {message}")
            return rid, denied, "user"
        result = obj.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        outcome = outcome if isinstance(outcome, dict) else {}
        option = outcome.get("optionId")
        if outcome.get("outcome") == "selected" and option in _KINDS:
            if option == "allow_always":
                self._always.add(tool)
                return rid, PermissionDecision(allow=True), "user:always"
            if option == "allow_once":
                return rid, PermissionDecision(allow=True), "user"
            return rid, PermissionDecision(allow=False, message="rejected by the ACP client"), "user"
        if outcome.get("outcome") == "cancelled":
            return rid, PermissionDecision(allow=False, message="the prompt was cancelled"), "user"
        return rid, PermissionDecision(allow=False, message="the ACP client chose no option we offered"), "user"
