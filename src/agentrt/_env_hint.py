"""Why a variable set in the caller's shell is missing in the agent: the launch passes only what it is told.

The child gets :data:`~agentrt._launch.SAFE_ENV_KEYS` and the
``AWP_AGENT_CLI_ENV_JSON`` entries, nothing else (see docs/launch-contract.md).
A user who exported ``OPENAI_API_KEY`` or ``AGENTRT_API_BASE_URL`` and expects
the agent to see it gets a warning naming the variable (never its value) and
how to pass it.

Only variables the agent is known to read are named: a preset's (the config's
``preset`` key, or an executable recognised as one of them), the reference
agent's.  For an agent agentrt knows nothing about, the common variables of
:data:`AGENT_VARIABLES` are named once per executable (remembered in
``$XDG_STATE_HOME/agentrt/env-hints``); ``AGENTRT_ENV_HINT=0`` silences every
such warning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._launch import contains_remote_url
from ._presets import PRESETS, REFERENCE_AGENT_READS

__all__ = ["AGENT_VARIABLES", "known_reads", "launch_warning", "unpassed_variables", "unpassed_warning"]

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


def unpassed_variables(
    parent_env: Mapping[str, str], child_env: Mapping[str, str], reads: Sequence[str] = AGENT_VARIABLES
) -> list[str]:
    """Names from ``reads`` set (non-blank) in ``parent_env`` but absent from ``child_env``."""
    return [name for name in reads if parent_env.get(name, "").strip() and name not in child_env]


def known_reads(executable: str, args: Sequence[str], preset: str | None = None) -> tuple[str, ...] | None:
    """The variables the agent is known to read, or ``None`` when agentrt does not know the agent.

    ``preset`` (the config's key) wins; else the executable (and, for a
    script started by an interpreter, its first argument) is recognised.
    """
    preset = preset if preset in PRESETS else _recognised(executable, args)
    if preset is not None:
        return PRESETS[preset].reads_env
    first = args[0] if args else ""
    base = os.path.basename(executable)
    if (base == "agentrt" and first == "agent") or (base.startswith("python") and tuple(args[-1:]) == ("agent",)):
        return REFERENCE_AGENT_READS
    return None


def _recognised(executable: str, args: Sequence[str]) -> str | None:
    """The preset whose executable this launch runs (directly, or as a script given to node)."""
    base = os.path.basename(executable)
    first = args[0] if args else ""
    by_node = base.startswith("node")
    if by_node and first.replace(os.sep, "/").endswith("claude-agent-acp/dist/index.js"):
        return "claude-agent-acp"
    for name, names in _EXECUTABLE_NAMES.items():
        if base in names or (by_node and os.path.basename(first) in names):
            return name
    return None


# What each preset's executable is called once resolved (npm's bin links name the first).
_EXECUTABLE_NAMES = {
    "claude-code": ("claude", "claude.exe"),
    "gemini": ("gemini", "gemini.js"),
    "codex-acp": ("codex-acp", "codex-acp.js"),
    "claude-agent-acp": ("claude-agent-acp",),
}


def _hint_file(env: Mapping[str, str]) -> Path | None:
    base = env.get("XDG_STATE_HOME", "").strip()
    if not os.path.isabs(base):
        home = env.get("HOME", "").strip()
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".local", "state")
    return Path(base) / "agentrt" / "env-hints"


def _first_time(env: Mapping[str, str], executable: str) -> bool:
    """True the first time ``executable`` is seen here (and remember it); True when nothing can be remembered."""
    path = _hint_file(env)
    if path is None:
        return True
    try:
        seen = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if executable in seen:
            return False
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(executable + "\n")
    except (OSError, UnicodeError):
        pass
    return True


def launch_warning(parent_env: Mapping[str, str], launch: Any, preset: str | None = None) -> str | None:
    """``env_not_passed`` for ``launch`` (a LaunchSpec), or ``None``.

    Names only the variables the agent is known to read (:func:`known_reads`);
    for an unknown agent, the common ones once per executable.
    ``AGENTRT_ENV_HINT=0`` turns the warning off.
    """
    if parent_env.get("AGENTRT_ENV_HINT", "").strip() == "0":
        return None
    child = launch.child_env(parent_env)
    reads = known_reads(launch.executable, tuple(launch.prefix_args), preset)
    if reads is not None:
        return unpassed_warning(parent_env, child, reads)
    if not unpassed_variables(parent_env, child) or not _first_time(parent_env, launch.executable):
        return None
    warning = unpassed_warning(parent_env, child)
    return None if warning is None else warning + (
        " (shown once for this agent, which agentrt does not know; AGENTRT_ENV_HINT=0 silences it)"
    )


def unpassed_warning(
    parent_env: Mapping[str, str], child_env: Mapping[str, str], reads: Sequence[str] = AGENT_VARIABLES
) -> str | None:
    """The warning line for :func:`unpassed_variables` (names only, never values), or ``None``."""
    names = unpassed_variables(parent_env, child_env, reads)
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
