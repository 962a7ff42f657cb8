"""Permission policy: how the host answers an agent's "may I use this tool?".

Claude-Code-style CLIs send a ``control_request`` of subtype ``can_use_tool``.
agentrt answers it through the policy a plugin provides
(``agentrt_permission_policy``); with none, :func:`deny_all` answers: the
request is denied with a clear message.  A policy that does not answer within
its bound is treated as a denial, so the agent never waits forever.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

__all__ = ["PermissionRequest", "PermissionDecision", "PermissionPolicy", "deny_all", "DENY_MESSAGE"]

DENY_MESSAGE = (
    "agentrt: tool use denied by the default permission policy "
    "(install or configure a permission-policy plugin to allow tools)"
)


@attrs.frozen(kw_only=True)
class PermissionRequest:
    """A tool the agent wants to run, with its input."""

    tool_name: str
    input: Mapping[str, Any]
    request_id: str
    raw: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class PermissionDecision:
    """Allow (optionally with a rewritten input) or deny with a message."""

    allow: bool
    message: str = ""
    updated_input: Mapping[str, Any] | None = None


PermissionPolicy = Callable[[PermissionRequest], Awaitable[PermissionDecision]]


async def deny_all(request: PermissionRequest) -> PermissionDecision:
    """The built-in policy: deny every tool, saying why."""
    return PermissionDecision(allow=False, message=DENY_MESSAGE)
