"""Why a variable set in the caller's shell is missing in the agent: the launch passes only what it is told.

The child gets :data:`~agentrt._launch.SAFE_ENV_KEYS` and the
``AWP_AGENT_CLI_ENV_JSON`` entries, nothing else (see docs/launch-contract.md).
A user who exported ``OPENAI_API_KEY`` or ``AGENTRT_API_BASE_URL`` and expects
the agent to see it gets a warning naming the variable (never its value) and
how to pass it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._launch import contains_remote_url

__all__ = ["AGENT_VARIABLES", "unpassed_variables", "unpassed_warning"]

#: Variables an agent CLI commonly needs from its caller: the reference agent's
#: own, and the usual provider keys and base URLs.
AGENT_VARIABLES: tuple[str, ...] = (
    "AGENTRT_API_BASE_URL",
    "AGENTRT_API_TOKEN",
    "AGENTRT_MODEL",
    "AGENTRT_PROVIDER",
    "AGENTRT_REMOTE_API_OPT_IN",
    "AGENTRT_SYSTEM_PROMPT",
    "AGENTRT_TIMEOUT_MS",
    "AWP_CONTROL_PLANE_URL",
    "AWP_CONTROL_PLANE_API_KEY",
    "AWP_AGENT_MANAGED_TASKS_OPT_IN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


def unpassed_variables(parent_env: Mapping[str, str], child_env: Mapping[str, str]) -> list[str]:
    """Names from :data:`AGENT_VARIABLES` set (non-blank) in ``parent_env`` but absent from ``child_env``."""
    return [name for name in AGENT_VARIABLES if parent_env.get(name, "").strip() and name not in child_env]


def unpassed_warning(parent_env: Mapping[str, str], child_env: Mapping[str, str]) -> str | None:
    """The warning line for :func:`unpassed_variables` (names only, never values), or ``None``."""
    names = unpassed_variables(parent_env, child_env)
    if not names:
        return None
    listed = ", ".join(names)
    example = ", ".join(f'"{name}": "..."' for name in names[:2])
    text = (
        f"agentrt: warning: env_not_passed: {listed} {'is' if len(names) == 1 else 'are'} set here but "
        "the agent does not get "
        f"{'it' if len(names) == 1 else 'them'}: the agent's environment holds only PATH, HOME, the locale "
        "and the AWP_AGENT_CLI_ENV_JSON entries. Pass "
        f"{'it' if len(names) == 1 else 'them'} with AWP_AGENT_CLI_ENV_JSON='{{{example}}}' "
        "or the agent's env table in the config file"
    )
    if any(contains_remote_url(parent_env[name]) for name in names):
        text += "; a remote URL also needs AWP_AGENT_REMOTE_API_OPT_IN=1 (or remote_api_opt_in = true)"
    return text
