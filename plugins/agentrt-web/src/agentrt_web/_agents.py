"""Which agent a web thread talks to: the server's default, or any agent of the config file (the picker).

A thread remembers the configured agent it was started with (``ThreadRecord.agent``); a thread without
one (made before the picker, or by ``agentrt chat --thread``) talks to the server's default agent (``-a``,
else ``default_agent``, else the launch contract).  A named agent picked for a thread runs as its table in
the config file says: the ``AWP_AGENT_CLI_*`` variables shape only the server's default agent, as they
shape ``agentrt run`` without ``-a``.  The config file is read once, when the server starts.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["ThreadAgent", "WebAgents"]

#: The launch contract's variables: they name the default agent, never one picked by name.
_LAUNCH_VARS = frozenset({
    "AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON", "AWP_AGENT_CLI_ENV_JSON", "AWP_AGENT_CLI_PROTOCOL",
    "AWP_AGENT_DEFAULT_MODEL",
})  # fmt: skip


@attrs.frozen(kw_only=True)
class ThreadAgent:
    """An agent a thread can talk to: its configured name (``None``: the launch contract's) and launch."""

    name: str | None
    launch: Any
    permissions: Any = None
    first_output_timeout: Any = "env"
    """``open_conversation``'s ``first_output_timeout`` for it (the agent's ``first_output_timeout``)."""

    @property
    def label(self) -> str:
        """What the page calls it: its configured name, else its executable's."""
        return self.name or str(self.launch.executable).rsplit("/", 1)[-1]


class WebAgents:
    """The server's default agent and the config file's agents, resolved on first use (then kept)."""

    def __init__(self, default: ThreadAgent, env: Mapping[str, str] | None = None, config: Any = None) -> None:
        self.default = default
        self._env = {k: v for k, v in (env or {}).items() if k not in _LAUNCH_VARS}
        self._config = config
        self._resolved: dict[str, ThreadAgent] = {}

    def names(self) -> list[str]:
        """The configured agents' names, sorted."""
        return sorted(self._config.agents) if self._config is not None else []

    def choices(self) -> list[dict[str, str]]:
        """The picker's options: the default first (value ``""``), then every other configured agent."""
        out = [{"value": "", "label": f"{self.default.label} (default)"}]
        out += [{"value": n, "label": n} for n in self.names() if n != self.default.name]
        return out

    def get(self, name: str | None) -> ThreadAgent:
        """The agent called ``name`` (``None``: the default), for a page's request.

        ``unknown_agent``, or the code of why it cannot run (``config_invalid``...).  The page gets the
        code and the agent's name only; the whole reason (it may quote the config file) goes to the
        server's log.
        """
        from agentrt.errors import AgentrtError

        try:
            return self._resolve(name)
        except AgentrtError as exc:
            shown = (name or "")[:64]
            if exc.code == "unknown_agent":
                raise AgentrtError(exc.code, f"no agent named {shown!r} in the config file") from None
            print(f"agentrt web: agent {shown!r}: {exc.code}: {exc.detail}", file=sys.stderr)
            raise AgentrtError(exc.code, f"the agent {shown!r} cannot start; the server's log says why") from None

    def _resolve(self, name: str | None) -> ThreadAgent:
        if name is None or name == self.default.name:
            return self.default
        agent = self._resolved.get(name)
        if agent is None:
            from agentrt.config import resolve_agent

            kwargs: dict[str, Any] = {} if self._config is None else {"config": self._config}
            resolved = resolve_agent(self._env, name, **kwargs)
            agent = self._resolved[name] = ThreadAgent(
                name=resolved.name, launch=resolved.launch, permissions=resolved.permissions,
                first_output_timeout=resolved.first_output_timeout)
        return agent

    def label(self, name: str | None) -> str:
        """What the page calls agent ``name`` (its name when it cannot be resolved)."""
        from agentrt.errors import AgentrtError

        try:
            return self._resolve(name).label
        except AgentrtError:
            return name or self.default.label
