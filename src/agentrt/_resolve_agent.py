"""The one place a launch is resolved: :func:`resolve_agent`, which every command calls.

The named agent (``-a NAME``, else ``default_agent`` when
``AWP_AGENT_CLI_EXECUTABLE`` is unset) is overlaid, field by field, with the
``AWP_AGENT_CLI_*`` variables, which win; command-line ``--protocol`` /
``--model`` win over both.  A launch-contract error about a field the
config gave is reported at the agent's table (``config_invalid``), one
about a field the environment gave as the launch contract's own code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs
import orjson

from ._config import AgentConfig, Config, Permissions, load_config
from ._launch import LaunchSpec
from .errors import AgentrtError

__all__ = ["ResolvedAgent", "resolve_agent"]

# Which configured field a launch-contract error code is about.
_FIELD_OF_CODE = {
    "cli_executable": "executable",
    "invalid_cli_args_json": "args",
    "invalid_model": "model",
    "invalid_cli_protocol": "protocol",
    "invalid_cli_env": "env",
    "cli_env": "env",
    "remote_api_requires_explicit_opt_in": "env",
}


@attrs.frozen(kw_only=True)
class ResolvedAgent:
    """What a command runs: the launch, and which configured agent it came from (if any)."""

    launch: LaunchSpec
    name: str | None = None
    permissions: Permissions | None = None
    config: Config
    first_output_timeout: float | Literal["env"] | None = "env"
    """What to pass ``open_conversation(first_output_timeout=...)``: the agent's ``first_output_timeout``
    (else its preset's; ``None``: no bound), or ``"env"`` (``AGENTRT_FIRST_OUTPUT_TIMEOUT`` is set,
    and wins, or nothing is configured: the default)."""


def _set(env: Mapping[str, str], key: str) -> bool:
    return bool(env.get(key, "").strip())


def resolve_agent(
    env: Mapping[str, str],
    name: str | None = None,
    *,
    executable: str | None = None,
    protocol: str | None = None,
    model: str | None = None,
    config: Config | None = None,
) -> ResolvedAgent:
    """The launch a command runs: configured agent ``name`` (or ``default_agent``) under the env.

    Per field, ``AWP_AGENT_CLI_EXECUTABLE`` / ``_ARGS_JSON`` / ``_ENV_JSON`` /
    ``_PROTOCOL`` and ``AWP_AGENT_DEFAULT_MODEL`` win over the agent's table;
    the keyword arguments (command-line options) win over both.
    ``default_agent`` applies only when neither ``name`` nor
    ``AWP_AGENT_CLI_EXECUTABLE`` nor ``executable`` is given.  ``config``:
    the file already loaded (else it is loaded from ``env``).  Errors:
    ``config_invalid``, ``unknown_agent``, or the launch contract's own codes.
    """
    cfg = load_config(env) if config is None else config
    if name is None and executable is None and not _set(env, "AWP_AGENT_CLI_EXECUTABLE"):
        name = cfg.default_agent
    agent = None
    if name is not None:
        agent = cfg.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(cfg.agents)) or "none"
            raise AgentrtError("unknown_agent", f"no agent named {name[:64]!r} in {cfg.path} (configured: {known})")
    merged = dict(env)
    from_config: set[str] = set()
    args: tuple[str, ...] | None = None
    if agent is not None:
        if executable is None and not _set(env, "AWP_AGENT_CLI_EXECUTABLE"):
            if not agent.found:
                raise cfg.invalid(agent.line, f"agents.{agent.name}.executable: {agent.executable!r} is not on PATH")
            executable = agent.executable
            from_config.add("executable")
        if not _set(env, "AWP_AGENT_CLI_ARGS_JSON"):
            args = agent.args
            from_config.add("args")
        if protocol is None and agent.protocol and not _set(env, "AWP_AGENT_CLI_PROTOCOL"):
            protocol = agent.protocol
        if model is None and agent.model and not _set(env, "AWP_AGENT_DEFAULT_MODEL"):
            model = agent.model
        if agent.env and not _set(env, "AWP_AGENT_CLI_ENV_JSON"):
            merged["AWP_AGENT_CLI_ENV_JSON"] = orjson.dumps(dict(agent.env)).decode()
            from_config.add("env")
        if agent.remote_api_opt_in:
            merged["AWP_AGENT_REMOTE_API_OPT_IN"] = "1"
    try:
        launch = LaunchSpec.from_env(merged, executable=executable, args=args, protocol=protocol, model=model)
    except AgentrtError as exc:
        field = next((f for prefix, f in _FIELD_OF_CODE.items() if exc.code.startswith(prefix)), None)
        if exc.code == "remote_api_requires_explicit_opt_in" and exc.detail.startswith("argument"):
            field = "args"
        if agent is not None and field in from_config:
            raise cfg.invalid(agent.line, f"agents.{agent.name}.{field}: {exc.code}: {exc.detail}") from None
        raise
    if agent is not None and not agent.partial_messages:
        launch = attrs.evolve(launch, partial_messages=False)
    return ResolvedAgent(
        launch=launch, name=agent.name if agent else None,
        permissions=agent.permissions if agent else None, config=cfg,
        first_output_timeout=_first_output(env, agent),
    )


def _first_output(env: Mapping[str, str], agent: AgentConfig | None) -> float | Literal["env"] | None:
    """The agent's first-output bound: ``AGENTRT_FIRST_OUTPUT_TIMEOUT`` wins, then the table's, then its preset's."""
    if agent is None or _set(env, "AGENTRT_FIRST_OUTPUT_TIMEOUT"):
        return "env"
    seconds = agent.first_output_timeout
    if seconds is None and agent.preset is not None:
        from ._presets import PRESETS

        preset = PRESETS.get(agent.preset)
        seconds = preset.first_output_timeout if preset is not None else None
    if seconds is None:
        return "env"
    return seconds or None
