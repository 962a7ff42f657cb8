"""Named agents' config file: where it is, reading it, and checking it whole into a :class:`Config`.

The file is ``$AGENTRT_CONFIG``, else ``$XDG_CONFIG_HOME/agentrt/config.toml``,
else ``~/.config/agentrt/config.toml``; a missing file is an empty config.  It
is read with the stdlib's ``tomllib`` and checked whole at load (shape, types,
the launch contract's own field validators), so a mistake is reported as
``config_invalid: <file>:<line>: <what>`` before anything runs.

The parts: one ``[agents.NAME]`` table and its check are
:mod:`agentrt._config_agent`'s; what a command runs, the config overlaid with
the ``AWP_AGENT_CLI_*`` variables, is :func:`agentrt._resolve_agent.resolve_agent`'s;
finding a key's line in the text is :mod:`agentrt._toml_lines`'.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._config_agent import AgentConfig, Permissions, check_agent
from ._toml_lines import header_line, key_line, syntax_error
from .errors import AgentrtError
from .masking import mask_env

__all__ = [
    "AgentConfig",
    "Config",
    "Permissions",
    "config_path",
    "load_config",
    "parse_config",
    "mask_env",
]

_TOP_KEYS = frozenset({"default_agent", "agents", "logs", "sinks"})
_LOGS_KEYS = ("enabled", "max_age_days", "max_size_mb")


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
    """Check the TOML ``text`` of the file at ``path`` (``env`` gives ``PATH`` for bare executables).

    Raises ``config_invalid`` (``<path>:<line>: <what>``) at the first mistake.
    """
    lines = text.splitlines()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, what = syntax_error(exc, lines)
        raise AgentrtError("config_invalid", f"{path}:{line}: {what}") from None
    cfg = Config(path=path, exists=True)
    for key in data:
        if key not in _TOP_KEYS:
            raise cfg.invalid(key_line(lines, None, key), f"unknown key {key!r} (expected one of "
                              f"{', '.join(sorted(_TOP_KEYS))})")
    agents_raw = data.get("agents", {})
    if not isinstance(agents_raw, dict):
        raise cfg.invalid(key_line(lines, None, "agents"), "agents must be a table of [agents.NAME] tables")
    agents: dict[str, AgentConfig] = {}
    for name, table in agents_raw.items():
        agents[name] = check_agent(cfg.invalid, lines, name, table, env)
    default = data.get("default_agent")
    if default is not None and (not isinstance(default, str) or default not in agents):
        raise cfg.invalid(key_line(lines, None, "default_agent"),
                          "default_agent must name one of the [agents.NAME] tables")
    enabled, max_age_days, max_size_mb = _logs(cfg, lines, data.get("logs", {}))
    return attrs.evolve(cfg, agents=agents, default_agent=default, logs_enabled=enabled,
                        logs_max_age_days=max_age_days, logs_max_size_mb=max_size_mb,
                        sinks=_sinks(cfg, lines, data.get("sinks", {})))


def _logs(cfg: Config, lines: Sequence[str], logs: Any) -> tuple[bool, float | None, float | None]:
    """``[logs]``: ``enabled`` (default true), and the retention limits ``max_age_days``, ``max_size_mb``."""
    header = header_line(lines, "logs")
    if not isinstance(logs, dict):
        raise cfg.invalid(header, "logs must be a table")
    for key in logs:
        if key not in _LOGS_KEYS:
            raise cfg.invalid(key_line(lines, header, key),
                              f"unknown key logs.{key} (expected: {', '.join(_LOGS_KEYS)})")
    enabled = logs.get("enabled", True)
    if not isinstance(enabled, bool):
        raise cfg.invalid(key_line(lines, header, "enabled"), "logs.enabled must be true or false")
    limits: dict[str, float | None] = {}
    for key in ("max_age_days", "max_size_mb"):
        value = logs.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise cfg.invalid(key_line(lines, header, key), f"logs.{key} must be a number above 0")
        limits[key] = None if value is None else float(value)
    return enabled, limits["max_age_days"], limits["max_size_mb"]


def _sinks(cfg: Config, lines: Sequence[str], table: Any) -> dict[str, str]:
    """``[sinks]``: a role (``terminal``, ``recorder``) to the name of the sink that holds it."""
    header = header_line(lines, "sinks")
    if not isinstance(table, dict):
        raise cfg.invalid(header, "sinks must be a table")
    for key, value in table.items():
        if key not in ("terminal", "recorder"):
            raise cfg.invalid(key_line(lines, header, key), f"unknown key sinks.{key} (expected: terminal, recorder)")
        if not isinstance(value, str) or not value:
            raise cfg.invalid(key_line(lines, header, key), f"sinks.{key} must be a sink's name")
    return dict(table)
