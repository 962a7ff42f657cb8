"""The bridge's permission policy: a named agent's own rules first, then the client (or the default).

``agentrt bridge -a NAME`` hosts an agent of the config file; that agent's
``permissions`` (``mode``, ``allow``, ``deny``) bind there as in ``run``:
a deny rule denies without asking anyone, an allow rule allows, and what no
rule decides goes by the mode: ``allow`` or ``deny`` at once, ``ask`` (and
no mode at all) to the fallback, the outer client when it can be asked, else
the bridge's default policy (which denies).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._approval import Ruleset, _aliases
from .errors import AgentrtError
from .permissions import PermissionDecision, PermissionPolicy, PermissionRequest

__all__ = ["bridge_policy"]


class _RuledPolicy:
    """Rules first; an ``ask`` verdict goes to ``fallback``."""

    def __init__(self, rules: Ruleset, fallback: PermissionPolicy) -> None:
        self._rules = rules
        self._fallback = fallback

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        tool_input: Mapping[str, Any] = request.input if isinstance(request.input, Mapping) else {}
        verdict = self._rules.decide(request.tool_name, tool_input, _aliases(request))
        if verdict.action == "allow":
            return PermissionDecision(allow=True)
        if verdict.action == "deny":
            return PermissionDecision(allow=False, message=f"agentrt: denied ({verdict.by})")
        return await self._fallback(request)


def bridge_policy(permissions: Any, fallback: PermissionPolicy) -> PermissionPolicy:
    """``fallback`` itself when the agent has no ``permissions``; else its rules in front of it.

    Raises ``invalid_tool_pattern`` for a pattern the rules refuse.
    """
    if permissions is None:
        return fallback
    try:
        rules = Ruleset.build(default_mode="ask", config=permissions)
    except ValueError as exc:
        raise AgentrtError("invalid_tool_pattern", str(exc)) from None
    return _RuledPolicy(rules, fallback)
