"""Arguments and environment of ``agentrt agent``, validated with stable codes.

The accepted argv is exactly the AWP launch contract's (plus ``--dialect``):
``--model V``, ``--resume V``, ``--dialect V``; ``--mcp-config``,
``--input-format`` and ``--output-format`` consume one value and are ignored;
``--print``, ``--verbose`` and ``--permission-prompt-tool stdio`` (which
agentrt's stream-json host passes every CLI) are ignored; anything else is
``unsupported_argument:<arg>``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import attrs

from ..errors import AgentrtError

__all__ = [
    "AgentArgs",
    "AgentSettings",
    "parse_args",
    "resolve_model",
    "resolve_timeout",
    "resolve_system_prompt",
    "resolve_state_dir",
    "DEFAULT_TIMEOUT_MS",
    "DEFAULT_DIALECT",
    "DEFAULT_PROVIDER",
]

DEFAULT_TIMEOUT_MS = 120_000
DEFAULT_DIALECT = "awp-jsonl"
DEFAULT_PROVIDER = "openai"
MAX_SYSTEM_PROMPT_BYTES = 256 * 1024
_IGNORED_WITH_VALUE = frozenset({"--mcp-config", "--input-format", "--output-format"})
_IGNORED_FLAGS = frozenset({"--print", "--verbose"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CODE = re.compile(r"[a-z0-9_:-]{1,160}", re.IGNORECASE)
# JavaScript's String.prototype.trim strips these too (the contract's peer trims that way).
_JS_WS = (
    " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(value: str) -> str:
    """``value`` trimmed the way JavaScript's ``trim()`` does."""
    return value.strip(_JS_WS)


@attrs.frozen(kw_only=True)
class AgentArgs:
    """The parsed command line."""

    model: str = ""
    resume: str = ""
    dialect: str = DEFAULT_DIALECT
    partial: bool = False
    """``--include-partial-messages``: stream-json prints each delta as it comes."""


def parse_args(argv: Sequence[str]) -> AgentArgs:
    """Parse argv; an unknown argument is ``unsupported_argument:<arg>``."""
    model = resume = ""
    dialect = DEFAULT_DIALECT
    partial = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if arg == "--model":
            model, i = js_trim(value), i + 2
        elif arg == "--resume":
            resume, i = js_trim(value), i + 2
        elif arg == "--dialect":
            dialect, i = js_trim(value) or DEFAULT_DIALECT, i + 2
        elif arg == "--include-partial-messages":
            partial, i = True, i + 1
        elif arg == "--permission-prompt-tool" and value == "stdio":
            i += 2  # its own tools run without asking the host: nothing to route
        elif arg in _IGNORED_WITH_VALUE:
            i += 2  # consumed with its value: MCP is not supported, formats are fixed
        elif arg in _IGNORED_FLAGS:
            i += 1
        else:
            # The argument is echoed in the code (as the original does), bounded so a
            # pasted blob cannot flood the output.
            # pasted blob cannot flood the output, and only when it fits the code alphabet.
            code = f"unsupported_argument:{arg}"
            if not _CODE.fullmatch(code):
                code = "unsupported_argument"
            raise AgentrtError(code, "see `agentrt agent --help`")
    return AgentArgs(model=model, resume=resume, dialect=dialect, partial=partial)


def resolve_model(args: AgentArgs, env: Mapping[str, str]) -> str:
    """``--model``, else ``AGENTRT_MODEL``; ``model_required`` when none is usable."""
    model = args.model or js_trim(env.get("AGENTRT_MODEL", ""))
    if not model or len(model) > 256 or _CONTROL.search(model):
        raise AgentrtError("model_required", "pass --model or set AGENTRT_MODEL (1-256 printable characters)")
    return model


def resolve_timeout(env: Mapping[str, str]) -> float:
    """``AGENTRT_TIMEOUT_MS`` in seconds (1000..600000 ms, default 120000)."""
    raw = js_trim(env.get("AGENTRT_TIMEOUT_MS", ""))
    if not raw:
        return DEFAULT_TIMEOUT_MS / 1000
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not 1000 <= int(raw) <= 600_000:
        raise AgentrtError("invalid_agentrt_timeout_ms", "AGENTRT_TIMEOUT_MS must be 1000..600000")
    return int(raw) / 1000


def resolve_system_prompt(env: Mapping[str, str]) -> str:
    """``AGENTRT_SYSTEM_PROMPT`` trimmed (≤256 KiB of UTF-8, no NUL); may be empty."""
    prompt = js_trim(env.get("AGENTRT_SYSTEM_PROMPT", ""))
    try:
        size = len(prompt.encode("utf-8"))
    except UnicodeEncodeError:  # undecodable bytes in the environment
        size = MAX_SYSTEM_PROMPT_BYTES + 1
    if size > MAX_SYSTEM_PROMPT_BYTES or "\0" in prompt:
        raise AgentrtError("invalid_system_prompt", "AGENTRT_SYSTEM_PROMPT must be ≤256 KiB of UTF-8 without NUL")
    return prompt


def resolve_state_dir(env: Mapping[str, str]) -> str:
    """``AGENTRT_STATE_DIR``, else ``$XDG_STATE_HOME/agentrt/sessions`` (``~/.local/state`` by default)."""
    explicit = js_trim(env.get("AGENTRT_STATE_DIR", ""))
    if explicit:
        if not os.path.isabs(explicit) or "\0" in explicit:
            raise AgentrtError("invalid_state_directory", "AGENTRT_STATE_DIR must be an absolute path")
        return os.path.normpath(explicit)
    # Read from ``env`` rather than os.environ (platformdirs would), so the
    # function is a pure function of its input; the result is the same path.
    base = env.get("XDG_STATE_HOME", "").strip()
    if not os.path.isabs(base):
        home = env.get("HOME", "")
        if not os.path.isabs(home):
            raise AgentrtError("invalid_state_directory", "set AGENTRT_STATE_DIR (no HOME to derive it from)")
        base = os.path.join(home, ".local", "state")
    return os.path.join(base, "agentrt", "sessions")


@attrs.frozen(kw_only=True)
class AgentSettings:
    """Everything the agent loop needs, validated."""

    model: str
    timeout: float
    system_prompt: str
    state_dir: str
    dialect: str
    provider: str
