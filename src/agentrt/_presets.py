"""Presets of ``agentrt agents add --preset``: how each real agent CLI is started, and what it reads.

Data only (the lookup on ``PATH`` is :mod:`agentrt._preset_find`).  A preset
names the executable to look for, the protocol, the arguments agentrt itself
does not add, and the environment variables the agent reads (copied into the
agent's env table by ``agents add`` when they are set, and the only ones
``env_not_passed`` warns about for that agent).  Why each argument is there is
said beside it; docs/agents.md has the same table.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

__all__ = ["Preset", "PRESETS", "REFERENCE_AGENT_READS"]


@attrs.frozen(kw_only=True)
class Preset:
    """One agent CLI's launch: what to find, how to speak to it, what it reads."""

    name: str
    executable: str
    """The bare name looked for (in ``--dir`` first, then on ``PATH``)."""
    protocol: str
    args: tuple[str, ...] = ()
    """Prefix arguments (the dialect adds its own: see docs/agents.md)."""
    reads_env: tuple[str, ...] = ()
    """Variables the agent reads: copied from the caller when set; ``env_not_passed`` names only these."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    """Entries the agent always gets (``--env`` overrides them)."""
    runner: str | None = None
    """An interpreter to start :attr:`executable` with (its path becomes the first argument)."""
    native: str | None = None
    """For an npm wrapper script: the platform binary beside it (``{os}``/``{arch}`` filled in), preferred."""
    needs_claude: bool = False
    """Set ``CLAUDE_CODE_EXECUTABLE`` to the Claude Code CLI found the same way."""
    first_output_timeout: float | None = None
    """Seconds the agent gets to write its first line after a prompt (``agents add`` saves it as the
    table's ``first_output_timeout``; ``None``: the default, 30 s, is enough)."""


_ANTHROPIC = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN")

PRESETS: dict[str, Preset] = {
    # stream-json adds --output-format/--input-format stream-json --print --verbose,
    # --permission-prompt-tool stdio and --include-partial-messages: nothing more is needed.
    "claude-code": Preset(name="claude-code", executable="claude", protocol="stream-json", reads_env=_ANTHROPIC),
    # Gemini CLI 0.61 speaks ACP with --acp (--experimental-acp is its deprecated spelling).
    "gemini": Preset(
        name="gemini",
        executable="gemini",
        protocol="acp",
        args=("--acp",),
        reads_env=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_CLOUD_PROJECT",
                   "GOOGLE_GENAI_USE_VERTEXAI"),
        # Without it Gemini CLI starts itself again as a child (a bigger heap): one process is
        # what agentrt stops, cancels and reaps.
        env={"GEMINI_CLI_NO_RELAUNCH": "true"},
        # It answers initialize in 5 s on an idle machine, 11-20+ s on a busy one: 30 s is too tight.
        first_output_timeout=120,
    ),
    # codex-acp speaks ACP on stdio with no argument; npm's codex-acp is a node wrapper that
    # runs the platform binary with spawnSync (a signal to it does not reach the binary).
    "codex-acp": Preset(
        name="codex-acp",
        executable="codex-acp",
        protocol="acp",
        reads_env=("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"),
        native="../../codex-acp-{os}-{arch}/bin/codex-acp",
    ),
    # Zed's adapter: an ACP agent that runs Claude Code (CLAUDE_CODE_EXECUTABLE) through the Agent SDK.
    "claude-agent-acp": Preset(
        name="claude-agent-acp",
        executable="claude-agent-acp",
        protocol="acp",
        reads_env=(*_ANTHROPIC, "CLAUDE_CODE_EXECUTABLE"),
        runner="node",
        needs_claude=True,
        # Node, the adapter, then Claude Code: its first reply took 1.1-2.3 s idle, so 30 s is only
        # ~13 times that; a busy machine slows Gemini's start ~9-fold (above).
        first_output_timeout=60,
    ),
}
"""Every preset, by name."""

REFERENCE_AGENT_READS: tuple[str, ...] = (
    "AGENTRT_API_BASE_URL",
    "AGENTRT_API_TOKEN",
    "AGENTRT_MODEL",
    "AGENTRT_PROVIDER",
    "AGENTRT_REMOTE_API_OPT_IN",
    "AGENTRT_SYSTEM_PROMPT",
    "AGENTRT_TIMEOUT_MS",
    "AGENTRT_STATE_DIR",
    "AWP_CONTROL_PLANE_URL",
    "AWP_CONTROL_PLANE_API_KEY",
    "AWP_AGENT_MANAGED_TASKS_OPT_IN",
)
"""What the reference agent (``agentrt agent``) reads."""
