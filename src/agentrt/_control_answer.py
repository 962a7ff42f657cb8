"""Answering the agent's control requests (``can_use_tool`` and the like).

The agent is blocked on the answer, so one always comes, bounded: the codec
may answer a request itself (one that needs the host's resources, such as an
ACP file read); otherwise a ``can_use_tool`` request goes to the permission
policy, and anything else is refused with an error.  A policy that fails or
does not answer in time denies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from .dialect import HostCodec
from .errors import AgentrtError
from .events import ControlRequest, Diagnostic
from .permissions import PermissionPolicy, PermissionRequest

__all__ = ["POLICY_TIMEOUT", "answer_control"]

POLICY_TIMEOUT = 60.0
"""How long the permission policy (or the codec) may take before the request is denied."""


async def answer_control(
    req: ControlRequest,
    *,
    codec: HostCodec,
    policy: PermissionPolicy,
    send: Callable[[bytes], Awaitable[None]],
    report: Callable[[Diagnostic], None],
    bound: float = POLICY_TIMEOUT,
) -> None:
    """Write the answer to ``req`` with ``send``; a write failure is a diagnostic given to ``report``."""
    own: bytes | None = None
    with trio.move_on_after(bound):
        own = await codec.answer_control(req)
    if own is not None:
        line: bytes | None = own
    else:
        response, error = await _decide(req, policy, bound)
        line = codec.encode_control_response(req, response, error)
    if line:
        try:
            await send(line)
        except AgentrtError as exc:
            report(Diagnostic(code=exc.code, detail="could not answer a control request"))


async def _decide(
    req: ControlRequest, policy: PermissionPolicy, bound: float
) -> tuple[dict[str, Any] | None, str | None]:
    """The (response, error) pair for a request the codec did not answer itself."""
    if req.subtype != "can_use_tool":
        return None, f"unsupported control request subtype: {req.subtype}"
    body = req.request
    tool_input = body.get("input")
    permission = PermissionRequest(
        tool_name=str(body.get("tool_name", "")),
        input=tool_input if isinstance(tool_input, Mapping) else {},
        request_id=req.request_id,
        raw=req.raw,
    )
    decision = None
    error: str | None = None
    with trio.move_on_after(bound):
        try:
            decision = await policy(permission)
        except Exception as exc:
            error = f"permission policy failed: {type(exc).__name__}"
    if decision is None:
        return None, error or "permission policy did not answer in time; denied"
    if decision.allow:
        return {"behavior": "allow", "updatedInput": dict(decision.updated_input or permission.input)}, None
    return {"behavior": "deny", "message": decision.message}, None
