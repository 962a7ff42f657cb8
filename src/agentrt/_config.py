"""Named agents: the TOML config file, and the one place a launch is resolved.

The file is ``$AGENTRT_CONFIG``, else ``$XDG_CONFIG_HOME/agentrt/config.toml``,
else ``~/.config/agentrt/config.toml``; a missing file is an empty config.  It
is read with the stdlib's ``tomllib`` and checked whole at load (shape, types,
the launch contract's own field validators), so a mistake is reported as
``config_invalid: <file>:<line>: <what>`` before anything runs.

:func:`resolve_agent` is what every command calls to get its
:class:`~agentrt._launch.LaunchSpec`: the named agent (``-a NAME``, else
``default_agent`` when ``AWP_AGENT_CLI_EXECUTABLE`` is unset) overlaid, field by
field, with the ``AWP_AGENT_CLI_*`` variables, which win; command-line
``--protocol`` / ``--model`` win over both.
"""

from __future__ import annotations

import os
import re
import shutil
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson

from ._launch import (
    LaunchSpec,
    _validate_args,
    _validate_env,
    _validate_model,
    _validate_protocol,
)
from .errors import AgentrtError
from .masking import mask_env

__all__ = [
    "AgentConfig",
    "Config",
    "Permissions",
    "ResolvedAgent",
    "config_path",
    "load_config",
    "parse_config",
    "resolve_agent",
    "mask_env",
]

PermissionMode = Literal["deny", "ask", "allow"]
PERMISSION_MODES: tuple[str, ...] = ("deny", "ask", "allow")

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# A tool name (letters, digits, `_ - . : *`), optionally with an argument
# pattern in parentheses: `Read`, `mcp__fs__*`, `Bash(git status:*)`.
_TOOL_PATTERN_RE = re.compile(r"[A-Za-z0-9_.:*-]{1,128}(\([^\x00-\x1f\x7f]{0,512}\))?")
_AGENT_KEYS = frozenset(
    {"executable", "args", "env", "protocol", "model", "permissions", "remote_api_opt_in", "partial_messages", "preset",
     "first_output_timeout"}
)
#: The largest ``first_output_timeout`` a table may set (an hour: beyond it, 0 says "no bound" plainly).
MAX_FIRST_OUTPUT_TIMEOUT = 3600.0
_TOP_KEYS = frozenset({"default_agent", "agents", "logs", "sinks"})
_LOCATION_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


@attrs.frozen(kw_only=True)
class Permissions:
    """An agent's tool-approval policy as configured (enforcement is the runtime's, not this module's)."""

    mode: PermissionMode | None = None
    """``deny``, ``ask`` or ``allow``; ``None``: the command's default."""
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class AgentConfig:
    """One ``[agents.NAME]`` table, checked."""

    name: str
    executable: str
    """Absolute; a bare name is looked up on ``PATH`` once, at load (symlinks resolved)."""
    found: bool = True
    """``False`` when a bare name was not on ``PATH``: using the agent is then an error."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    protocol: str | None = None
    model: str | None = None
    permissions: Permissions | None = None
    remote_api_opt_in: bool = False
    partial_messages: bool = True
    """``false``: no live deltas (stream-json: no ``--include-partial-messages``)."""
    preset: str | None = None
    """The preset ``agents add --preset`` filled the table from (it says which env variables the agent reads)."""
    first_output_timeout: float | None = None
    """Seconds a new process of the agent has to write its first recognised line after the prompt
    (``0``: no bound; ``None``: not set, the preset's or the default applies)."""
    line: int = 1
    """The line of the table's header in the file (for error messages)."""


@attrs.frozen(kw_only=True)
class Config:
    """The whole config file, checked."""

    path: Path
    exists: bool = False
    agents: Mapping[str, AgentConfig] = attrs.field(factory=dict)
    default_agent: str | None = None
    logs_enabled: bool = True
    """``[logs] enabled``: record conversations in the database (default true)."""
    logs_max_age_days: float | None = None
    """``[logs] max_age_days``: ``agentrt logs --prune`` removes conversations started longer ago."""
    logs_max_size_mb: float | None = None
    """``[logs] max_size_mb``: ``agentrt logs --prune`` removes the oldest conversations until the data fits."""
    sinks: Mapping[str, str] = attrs.field(factory=dict)
    """``[sinks] terminal`` / ``recorder``: the sink that holds the role when several loaded sinks do."""

    def invalid(self, line: int, what: str) -> AgentrtError:
        """The ``config_invalid`` error for ``what`` at ``line`` of this file."""
        return AgentrtError("config_invalid", f"{self.path}:{line}: {what}")


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


def config_path(env: Mapping[str, str]) -> Path:
    """``AGENTRT_CONFIG``, else ``$XDG_CONFIG_HOME/agentrt/config.toml``, else ``~/.config/agentrt/config.toml``."""
    explicit = env.get("AGENTRT_CONFIG", "").strip()
    if explicit:
        return Path(explicit)
    base = env.get("XDG_CONFIG_HOME", "").strip()
    # The XDG spec says relative values are invalid and must be ignored.
    if base and os.path.isabs(base):
        return Path(base) / "agentrt" / "config.toml"
    home = env.get("HOME", "").strip() or os.path.expanduser("~")
    return Path(home) / ".config" / "agentrt" / "config.toml"


def load_config(env: Mapping[str, str]) -> Config:
    """Read and check the config file named by ``env``; a missing file is an empty config."""
    path = config_path(env)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return Config(path=path)
    except UnicodeDecodeError:
        raise AgentrtError("config_invalid", f"{path}:1: the file is not UTF-8") from None
    except OSError as exc:
        raise AgentrtError("config_invalid", f"{path}:1: cannot read the file: {exc.strerror}") from None
    return parse_config(text, path, env)


def parse_config(text: str, path: Path, env: Mapping[str, str]) -> Config:
    """Check the TOML ``text`` of the file at ``path`` (``env`` gives ``PATH`` for bare executables)."""
    lines = text.splitlines()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _LOCATION_RE.search(message)
        line = int(match.group(1)) if match else max(1, len(lines))
        what = message[: match.start()] if match else message.replace("(at end of document)", "").strip()
        if not match:
            what += " at the end of the file"
        raise AgentrtError("config_invalid", f"{path}:{line}: {what[:1].lower()}{what[1:]}") from None
    cfg = Config(path=path, exists=True)
    for key in data:
        if key not in _TOP_KEYS:
            raise cfg.invalid(_key_line(lines, None, key), f"unknown key {key!r} (expected one of "
                              f"{', '.join(sorted(_TOP_KEYS))})")
    agents_raw = data.get("agents", {})
    if not isinstance(agents_raw, dict):
        raise cfg.invalid(_key_line(lines, None, "agents"), "agents must be a table of [agents.NAME] tables")
    agents: dict[str, AgentConfig] = {}
    for name, table in agents_raw.items():
        agents[name] = _agent(cfg, lines, name, table, env)
    default = data.get("default_agent")
    if default is not None and (not isinstance(default, str) or default not in agents):
        raise cfg.invalid(_key_line(lines, None, "default_agent"),
                          "default_agent must name one of the [agents.NAME] tables")
    logs = data.get("logs", {})
    header = _header_line(lines, "logs")
    if not isinstance(logs, dict):
        raise cfg.invalid(header, "logs must be a table")
    for key in logs:
        if key not in _LOGS_KEYS:
            raise cfg.invalid(_key_line(lines, header, key),
                              f"unknown key logs.{key} (expected: {', '.join(_LOGS_KEYS)})")
    enabled = logs.get("enabled", True)
    if not isinstance(enabled, bool):
        raise cfg.invalid(_key_line(lines, header, "enabled"), "logs.enabled must be true or false")
    limits: dict[str, float | None] = {}
    for key in ("max_age_days", "max_size_mb"):
        value = logs.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise cfg.invalid(_key_line(lines, header, key), f"logs.{key} must be a number above 0")
        limits[key] = None if value is None else float(value)
    return attrs.evolve(cfg, agents=agents, default_agent=default, logs_enabled=enabled,
                        logs_max_age_days=limits["max_age_days"], logs_max_size_mb=limits["max_size_mb"],
                        sinks=_sinks(cfg, lines, data.get("sinks", {})))


def _sinks(cfg: Config, lines: Sequence[str], table: Any) -> dict[str, str]:
    """``[sinks]``: a role (``terminal``, ``recorder``) to the name of the sink that holds it."""
    header = _header_line(lines, "sinks")
    if not isinstance(table, dict):
        raise cfg.invalid(header, "sinks must be a table")
    for key, value in table.items():
        if key not in ("terminal", "recorder"):
            raise cfg.invalid(_key_line(lines, header, key), f"unknown key sinks.{key} (expected: terminal, recorder)")
        if not isinstance(value, str) or not value:
            raise cfg.invalid(_key_line(lines, header, key), f"sinks.{key} must be a sink's name")
    return dict(table)


_LOGS_KEYS = ("enabled", "max_age_days", "max_size_mb")


def _agent(cfg: Config, lines: Sequence[str], name: str, table: Any, env: Mapping[str, str]) -> AgentConfig:
    header = _header_line(lines, f"agents.{name}", name)
    where = f"agents.{name}"

    def bad(key: str | None, what: str) -> AgentrtError:
        return cfg.invalid(header if key is None else _key_line(lines, header, key), what)

    if _NAME_RE.fullmatch(name) is None:
        raise bad(None, f"agent name {name[:64]!r} must match [A-Za-z0-9][A-Za-z0-9_-]{{0,63}}")
    if not isinstance(table, dict):
        raise bad(None, f"{where} must be a table")
    for key in table:
        if key not in _AGENT_KEYS:
            raise bad(key, f"unknown key {where}.{key} (expected one of {', '.join(sorted(_AGENT_KEYS))})")
    exe = table.get("executable")
    if not isinstance(exe, str) or not exe.strip():
        raise bad("executable" if "executable" in table else None, f"{where}.executable must be a non-empty string")
    exe = exe.strip()
    found = True
    if not os.path.isabs(exe):
        if "/" in exe:
            raise bad("executable", f"{where}.executable must be absolute or a bare name looked up on PATH")
        located = shutil.which(exe, path=env.get("PATH", os.defpath))
        if located is None:
            found = False
        else:
            # The launch contract refuses symlinks; a PATH entry often is one
            # (npm, pipx), so the file it names is what gets validated and run.
            exe = os.path.realpath(located)
    try:
        args = _validate_args(_list(table, "args", bad, where), f"{where}.args")
        protocol = _validate_protocol(_str(table, "protocol", bad, where), f"{where}.protocol") \
            if "protocol" in table else None
        model = _validate_model(_str(table, "model", bad, where), f"{where}.model")
        env_table = table.get("env", {})
        if not isinstance(env_table, dict):
            raise bad("env", f"{where}.env must be a table of strings")
        entries = _validate_env(env_table, remote_ok=True, source=f"{where}.env")
    except AgentrtError as exc:
        if exc.code == "config_invalid":
            raise
        named = re.match(rf"{re.escape(where)}\.(\w+)", exc.detail)
        raise bad(named.group(1) if named else None, f"{exc.code}: {exc.detail}") from None
    opt_in = table.get("remote_api_opt_in", False)
    if not isinstance(opt_in, bool):
        raise bad("remote_api_opt_in", f"{where}.remote_api_opt_in must be true or false")
    permissions = _permissions(table.get("permissions"), bad, where) if "permissions" in table else None
    partial = table.get("partial_messages", True)
    if not isinstance(partial, bool):
        raise bad("partial_messages", f"{where}.partial_messages must be true or false")
    preset = table.get("preset")
    if preset is not None and preset not in _preset_names():
        raise bad("preset", f"{where}.preset must be one of {', '.join(_preset_names())}")
    first_output = table.get("first_output_timeout")
    if first_output is not None and (
        isinstance(first_output, bool) or not isinstance(first_output, (int, float))
        or not 0 <= first_output <= MAX_FIRST_OUTPUT_TIMEOUT  # NaN fails this too
    ):
        raise bad("first_output_timeout", f"{where}.first_output_timeout must be a number of seconds from 0 "
                                          f"(no bound) to {MAX_FIRST_OUTPUT_TIMEOUT:g}")
    return AgentConfig(name=name, executable=exe, found=found, args=args, env=entries, protocol=protocol,
                       model=model, permissions=permissions, remote_api_opt_in=opt_in, partial_messages=partial,
                       preset=preset, line=header,
                       first_output_timeout=None if first_output is None else float(first_output))


def _preset_names() -> tuple[str, ...]:
    from ._presets import PRESETS

    return tuple(PRESETS)


def _list(table: Mapping[str, Any], key: str, bad: Any, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list):
        raise bad(key, f"{where}.{key} must be an array of strings")
    return value


def _str(table: Mapping[str, Any], key: str, bad: Any, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise bad(key, f"{where}.{key} must be a string")
    return value


def _permissions(raw: Any, bad: Any, where: str) -> Permissions:
    where = f"{where}.permissions"
    if not isinstance(raw, dict):
        raise bad("permissions", f"{where} must be a table with mode, allow and deny")
    for key in raw:
        if key not in ("mode", "allow", "deny"):
            raise bad("permissions", f"unknown key {where}.{key} (expected mode, allow, deny)")
    mode = raw.get("mode")
    if mode is not None and mode not in PERMISSION_MODES:
        raise bad("permissions", f"{where}.mode must be one of deny, ask, allow")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("allow", "deny"):
        items = raw.get(key, [])
        if not isinstance(items, list):
            raise bad("permissions", f"{where}.{key} must be an array of tool patterns")
        for index, item in enumerate(items):
            if not isinstance(item, str) or _TOOL_PATTERN_RE.fullmatch(item) is None:
                raise bad("permissions", f"{where}.{key}[{index}] is not a tool pattern like Read or "
                          "Bash(git status:*)")
        lists[key] = tuple(items)
    return Permissions(mode=mode, allow=lists["allow"], deny=lists["deny"])


def _header_line(lines: Sequence[str], dotted: str, name: str | None = None) -> int:
    """The line (1-based) of ``[dotted]``; for an agent also ``[agents."name"]`` or an inline ``name =``."""
    parts = [re.escape(p) for p in dotted.split(".")]
    if name is not None:
        parts[-1] = rf"(?:{re.escape(name)}|\"{re.escape(name)}\"|'{re.escape(name)}')"
    header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(parts) + r"\s*\]")
    for number, line in enumerate(lines, 1):
        if header.match(line):
            return number
    if name is not None:  # agents.NAME = {...} or [agents] NAME = {...}
        inline = re.compile(rf"^\s*(?:agents\s*\.\s*)?[\"']?{re.escape(name)}[\"']?\s*=")
        for number, line in enumerate(lines, 1):
            if inline.match(line):
                return number
    return 1


def _key_line(lines: Sequence[str], header: int | None, key: str) -> int:
    """The line of ``key = ...`` inside the table starting at ``header`` (top level: ``None``)."""
    start = 0 if header is None else header
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number in range(start, len(lines)):
        line = lines[number]
        if number > start and line.lstrip().startswith("[") and header is not None:
            break
        if header is None and line.lstrip().startswith("["):
            break
        if pattern.match(line):
            return number + 1
    return header or 1


def _set(env: Mapping[str, str], key: str) -> bool:
    return bool(env.get(key, "").strip())


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
    ``AWP_AGENT_CLI_EXECUTABLE`` nor ``executable`` is given.  Errors:
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
