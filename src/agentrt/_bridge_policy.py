"""The bridge's permission policy: a named agent's own rules first, then the client (or the default).

``agentrt bridge -a NAME`` hosts an agent of the config file; that agent's
``permissions`` (``mode``, ``allow``, ``deny``) bind there as in ``run``:
a deny rule denies without asking anyone, an allow rule allows, and what no
rule decides goes by the mode: ``allow`` or ``deny`` at once, ``ask`` (and
no mode at all) to the fallback, the outer client when it can be asked, else
the bridge's default policy (which denies).

Every decision is recorded as ``run`` records its own (``agentrt logs
--approvals``): the same :class:`~agentrt.approval.ApprovalDecision` fields,
through the thread store's ``record_approval``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import trio

from ._approval import ApprovalDecision, Recorder, Ruleset, _aliases
from ._approval_show import input_summary
from .display import escape_text
from .errors import AgentrtError
from .permissions import PermissionDecision, PermissionPolicy, PermissionRequest

__all__ = ["approval_recorder", "bridge_policy"]

Where = Callable[[], tuple[str | None, str | None]]
"""``(conversation id, thread)`` a decision is recorded under: the hosted conversation's, now."""
_RECORD_BOUND = 10.0  # the answer to the hosted CLI never waits on the database longer


@runtime_checkable
class _Attributing(Protocol):
    """A fallback policy that says who decided (the bridge's client asker is one)."""

    async def decide(self, request: PermissionRequest) -> tuple[PermissionDecision, str]:
        """The decision and who made it (recorded as ``by``)."""
        ...


class _RuledPolicy:
    """Rules first (when any); an ``ask`` verdict goes to ``fallback``; every decision is recorded.

    ``fallback`` may offer ``decide(request) -> (decision, by)`` to say who
    decided (the bridge's client asker does); otherwise its decisions are
    recorded as ``by="default"``.
    """

    def __init__(
        self, rules: Ruleset | None, fallback: PermissionPolicy, recorder: Recorder | None, where: Where
    ) -> None:
        self._rules = rules
        self._fallback = fallback
        self._recorder = recorder
        self._where = where

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        decision, by = await self._decide(request)
        if self._recorder is not None:
            await self._record(request, decision, by)
        return decision

    async def _decide(self, request: PermissionRequest) -> tuple[PermissionDecision, str]:
        if self._rules is not None:
            tool_input: Mapping[str, Any] = request.input if isinstance(request.input, Mapping) else {}
            verdict = self._rules.decide(request.tool_name, tool_input, _aliases(request))
            if verdict.action == "allow":
                return PermissionDecision(allow=True), verdict.by
            if verdict.action == "deny":
                return PermissionDecision(allow=False, message=f"agentrt: denied ({verdict.by})"), verdict.by
        if isinstance(self._fallback, _Attributing):
            return await self._fallback.decide(request)
        return await self._fallback(request), "default"

    async def _record(self, request: PermissionRequest, decision: PermissionDecision, by: str) -> None:
        assert self._recorder is not None
        conversation_id, thread = self._where()
        action: Literal["allow", "deny"] = "allow" if decision.allow else "deny"
        tool_input: Mapping[str, Any] = request.input if isinstance(request.input, Mapping) else {}
        record = ApprovalDecision(
            conversation_id=conversation_id, thread=thread, tool=escape_text(request.tool_name[:128]),
            summary=input_summary(tool_input), decision=action, by=by, at=time.time(),
        )  # fmt: skip
        # Bounded, and its failure never changes the decision (as in ``run``).
        with trio.move_on_after(_RECORD_BOUND):
            try:
                await self._recorder(record)
            except Exception as exc:
                note = f"could not record the decision on {record.tool}: {type(exc).__name__}"
                print(f"agentrt bridge: note: {note}", file=sys.stderr, flush=True)


def bridge_policy(
    permissions: Any,
    fallback: PermissionPolicy,
    *,
    recorder: Recorder | None = None,
    where: Where = lambda: (None, None),
) -> PermissionPolicy:
    """``fallback`` itself when the agent has no ``permissions`` and nothing records; else the rules in front.

    ``recorder`` (the thread store's ``record_approval``) gets every decision,
    under ``where()``.  Raises ``invalid_tool_pattern`` for a pattern the rules refuse.
    """
    if permissions is None and recorder is None:
        return fallback
    rules = None
    if permissions is not None:
        try:
            rules = Ruleset.build(default_mode="ask", config=permissions)
        except ValueError as exc:
            raise AgentrtError("invalid_tool_pattern", str(exc)) from None
    return _RuledPolicy(rules, fallback, recorder, where)


def approval_recorder(plugins: Any, env: Mapping[str, str], warn: Callable[[str, str], None]) -> Recorder | None:
    """The thread store's ``record_approval``, as ``run`` records with; ``None`` when logs are off or unusable."""
    from ._cli_approval import store_recorder
    from ._config import load_config

    if not load_config(env).logs_enabled:
        return None
    try:
        return store_recorder(plugins, env)
    except AgentrtError as exc:  # a bad database setting: the bridge works on, unrecorded
        warn(exc.code, exc.detail)
        return None
