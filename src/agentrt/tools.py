"""Tools the reference agent offers to its model.

A tool plugin registers a :data:`ToolFactory`; the factory reads the agent's
environment and returns a :class:`Tool`, or ``None`` when the tool is not
configured (not offered), or raises :class:`~agentrt.AgentrtError` when the
configuration is partial or invalid (a startup error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

__all__ = ["ToolContext", "Tool", "ToolFactory"]


@attrs.frozen(kw_only=True)
class ToolContext:
    """What a tool call knows about where it runs.

    ``turn_identity`` is the sha256 hex of the turn's request messages (the
    managed-task idempotency key is derived from it, §B).
    """

    session_id: str
    turn_identity: str
    tool_call_id: str


class Tool(Protocol):
    """A callable tool with a JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Run the tool; return a JSON-serialisable result.

        Raise :class:`~agentrt.AgentrtError` for failures the model should see
        as ``{"error": code}``.
        """
        ...


ToolFactory = Callable[[Mapping[str, str]], "Tool | None"]
"""A registered tool factory: the agent's environment in, tool (or None) out."""
