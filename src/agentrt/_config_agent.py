"""One ``[agents.NAME]`` table of the config file: :class:`AgentConfig`, and the check that builds it.

:func:`check_agent` refuses what the launch would refuse, at load: unknown
keys, wrong types, an executable that is neither absolute nor a bare name,
and the launch contract's own field rules (its validators, so the rules are
one), each error naming the table's key and line.  A bare executable is
looked up on ``PATH`` once, here; one that is not there is kept (``found``
false), so a config naming an agent not installed still loads and only
using that agent fails.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from ._launch import _validate_args, _validate_env, _validate_model, _validate_protocol
from ._toml_lines import header_line, key_line
from .errors import AgentrtError

__all__ = ["AgentConfig", "MAX_FIRST_OUTPUT_TIMEOUT", "PERMISSION_MODES", "Permissions", "check_agent"]

PermissionMode = Literal["deny", "ask", "allow"]
PERMISSION_MODES: tuple[str, ...] = ("deny", "ask", "allow")
#: The largest ``first_output_timeout`` a table may set (an hour: beyond it, 0 says "no bound" plainly).
MAX_FIRST_OUTPUT_TIMEOUT = 3600.0

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# A tool name (letters, digits, `_ - . : *`), optionally with an argument
# pattern in parentheses: `Read`, `mcp__fs__*`, `Bash(git status:*)`.
_TOOL_PATTERN_RE = re.compile(r"[A-Za-z0-9_.:*-]{1,128}(\([^\x00-\x1f\x7f]{0,512}\))?")
_AGENT_KEYS = frozenset(
    {"executable", "args", "env", "protocol", "model", "permissions", "remote_api_opt_in", "partial_messages", "preset",
     "first_output_timeout"}
)

#: ``bad(key, what)``: the ``config_invalid`` error for ``what``, at ``key``'s line (``None``: the header's).
_Bad = Callable[[str | None, str], AgentrtError]


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


def check_agent(
    invalid: Callable[[int, str], AgentrtError],
    lines: Sequence[str],
    name: str,
    table: Any,
    env: Mapping[str, str],
) -> AgentConfig:
    """The table ``[agents.name]`` (as ``tomllib`` gave it) checked; ``env`` gives ``PATH`` for a bare executable.

    Raises ``invalid(line, what)`` (the file's ``config_invalid``) at the
    first mistake; a launch-contract error is wrapped as
    ``<its code>: <its detail>`` at the key it is about.
    """
    header = header_line(lines, f"agents.{name}", name)
    where = f"agents.{name}"

    def bad(key: str | None, what: str) -> AgentrtError:
        return invalid(header if key is None else key_line(lines, header, key), what)

    if _NAME_RE.fullmatch(name) is None:
        raise bad(None, f"agent name {name[:64]!r} must match [A-Za-z0-9][A-Za-z0-9_-]{{0,63}}")
    if not isinstance(table, dict):
        raise bad(None, f"{where} must be a table")
    for key in table:
        if key not in _AGENT_KEYS:
            raise bad(key, f"unknown key {where}.{key} (expected one of {', '.join(sorted(_AGENT_KEYS))})")
    exe, found = _executable(table, env, bad, where)
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


def _executable(table: Mapping[str, Any], env: Mapping[str, str], bad: _Bad, where: str) -> tuple[str, bool]:
    """The table's executable made absolute (a bare name looked up on ``PATH``), and whether it was found."""
    exe = table.get("executable")
    if not isinstance(exe, str) or not exe.strip():
        raise bad("executable" if "executable" in table else None, f"{where}.executable must be a non-empty string")
    exe = exe.strip()
    if os.path.isabs(exe):
        return exe, True
    if "/" in exe:
        raise bad("executable", f"{where}.executable must be absolute or a bare name looked up on PATH")
    located = shutil.which(exe, path=env.get("PATH", os.defpath))
    if located is None:
        return exe, False
    # The launch contract refuses symlinks; a PATH entry often is one
    # (npm, pipx), so the file it names is what gets validated and run.
    return os.path.realpath(located), True


def _preset_names() -> tuple[str, ...]:
    from ._presets import PRESETS

    return tuple(PRESETS)


def _list(table: Mapping[str, Any], key: str, bad: _Bad, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list):
        raise bad(key, f"{where}.{key} must be an array of strings")
    return value


def _str(table: Mapping[str, Any], key: str, bad: _Bad, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise bad(key, f"{where}.{key} must be a string")
    return value


def _permissions(raw: Any, bad: _Bad, where: str) -> Permissions:
    """``permissions = {mode, allow, deny}``: a known mode, and tool patterns like ``Bash(git status:*)``."""
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
