"""A fixture tool plugin for the reference-agent tests (loaded with AGENTRT_PLUGIN_MODULES).

``AGENTRT_TEST_TOOLS=1`` offers three tools: ``echo`` (returns its arguments
and the call's context), ``fail`` (raises ``AgentrtError("fixture_tool_failed")``)
and ``crash`` (raises ``RuntimeError``).  ``AGENTRT_TEST_TOOLS=partial`` is a
half-configured tool: its factory raises, which must stop the agent at startup.
Unset: nothing is offered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentrt import AgentrtError, hookimpl
from agentrt.tools import ToolContext


class _Tool:
    def __init__(self, name: str, behaviour: str) -> None:
        self.name = name
        self.description = f"fixture tool {name}"
        self.parameters: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
        self._behaviour = behaviour

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        if self._behaviour == "fail":
            raise AgentrtError("fixture_tool_failed", "this tool always fails")
        if self._behaviour == "crash":
            raise RuntimeError("a bug in the tool")
        return {
            "echo": arguments,
            "session_id": context.session_id,
            "turn_identity": context.turn_identity,
            "tool_call_id": context.tool_call_id,
        }


def _factory(name: str) -> Callable[[Mapping[str, str]], _Tool | None]:
    def make(env: Mapping[str, str]) -> _Tool | None:
        mode = env.get("AGENTRT_TEST_TOOLS", "")
        if mode == "partial":
            raise AgentrtError("fixture_tool_configuration_incomplete", "half configured")
        if mode != "1":
            return None
        return _Tool(name, name)

    return make


@hookimpl
def agentrt_register_tools(register: Callable[[str, Any], None]) -> None:
    """Register the fixture tools."""
    for name in ("echo", "fail", "crash"):
        register(name, _factory(name))
