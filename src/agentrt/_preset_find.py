"""Finding and checking an agent's executable when ``agents add`` saves it, and filling in a preset.

``agents add`` checks the file at once (so a typo fails there, not on the
next ``run`` as ``config_invalid``): it exists, is a regular file and is
executable; a symbolic link is resolved and the file it names is what gets
saved (the launch contract refuses symlinks).  Errors carry the launch
contract's codes: ``cli_executable_not_found``,
``cli_executable_not_regular_file``, ``cli_executable_not_executable``.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from collections.abc import Mapping, Sequence

import attrs

from ._launch import _validate_executable
from ._presets import PRESETS, Preset
from .errors import AgentrtError

__all__ = ["CheckedExecutable", "FilledPreset", "check_executable", "fill_preset", "find_on_path"]


@attrs.frozen(kw_only=True)
class CheckedExecutable:
    """An executable as ``agents add`` saves it."""

    saved: str
    """What goes in the file: the real path, or a bare name (looked up on ``PATH`` when the file is read)."""
    real: str
    """The regular file it is now."""
    link: str | None = None
    """The symbolic link that was resolved to :attr:`real`, if any."""


@attrs.frozen(kw_only=True)
class FilledPreset:
    """What a preset puts in the agent's table."""

    executable: CheckedExecutable
    args: tuple[str, ...]
    protocol: str
    env: Mapping[str, str]
    copied: tuple[str, ...] = ()
    """Names of the variables copied from the caller's environment (never their values)."""
    notes: tuple[str, ...] = ()
    """Lines worth printing (which files were chosen and why)."""


def _search_path(dirs: Sequence[str], env: Mapping[str, str]) -> str:
    return os.pathsep.join([*dirs, env.get("PATH", os.defpath)])


def find_on_path(name: str, dirs: Sequence[str], env: Mapping[str, str]) -> str | None:
    """``name`` in ``dirs`` (in order), then on ``env``'s ``PATH``; ``None`` when nowhere."""
    return shutil.which(name, path=_search_path(dirs, env))


def check_executable(
    value: str, *, dirs: Sequence[str] = (), env: Mapping[str, str] | None = None, keep_bare: bool = False
) -> CheckedExecutable:
    """Check ``value`` (absolute, or a bare name looked up in ``dirs`` then on ``PATH``) now.

    A symlink is resolved and the file it names is what is checked and saved;
    with ``keep_bare``, a bare name found on ``PATH`` (not in ``dirs``) is
    saved as given, since the config file looks it up again when read.
    """
    env = os.environ if env is None else env
    value = value.strip()
    if not value:
        raise AgentrtError("cli_executable_not_found", "the executable is empty")
    bare = not os.path.isabs(value)
    if not bare:
        located = os.path.normpath(value)
        if not os.path.lexists(located):
            raise AgentrtError("cli_executable_not_found", f"no such file: {located}")
    elif "/" in value:
        raise AgentrtError("cli_executable_must_be_absolute", f"{value[:200]!r} must be absolute or a bare name")
    else:
        found = find_on_path(value, dirs, env)
        if found is None:
            where = f"{', '.join(dirs)} or PATH" if dirs else "PATH"
            raise AgentrtError("cli_executable_not_found", f"{value[:64]!r} is not in {where}")
        located = os.path.abspath(found)
    real = os.path.realpath(located)
    _validate_executable(real, "executable")
    link = located if real != located else None
    saved = real
    if bare and keep_bare and find_on_path(value, (), env) == found:
        saved = value
    return CheckedExecutable(saved=saved, real=real, link=link)


def _native(preset: Preset, real: str) -> str | None:
    """The platform binary an npm wrapper script stands for, when it is installed beside it."""
    if preset.native is None or not real.endswith(".js"):
        return None
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(platform.machine().lower(), platform.machine())
    rel = preset.native.format(os=sys.platform if sys.platform != "win32" else "win32", arch=machine)
    candidate = os.path.normpath(os.path.join(os.path.dirname(real), rel))
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def fill_preset(
    name: str, *, dirs: Sequence[str] = (), executable: str | None = None, env: Mapping[str, str] | None = None
) -> FilledPreset:
    """The table entries of preset ``name``: its executable found (``executable`` wins), args, env.

    Errors: ``unknown_preset``, the executable checks of :func:`check_executable`,
    ``preset_dependency_not_found`` (``node`` or the Claude Code CLI a preset
    needs beside its own executable).
    """
    env = os.environ if env is None else env
    preset = PRESETS.get(name)
    if preset is None:
        raise AgentrtError("unknown_preset", f"no preset {name[:64]!r} (known: {', '.join(PRESETS)})")
    try:
        checked = check_executable(executable or preset.executable, dirs=dirs, env=env)
    except AgentrtError as exc:
        hint = "" if executable else f" (the {name} preset looks in --dir, then on PATH; or give --executable)"
        raise AgentrtError(exc.code, exc.detail + hint) from None
    notes: list[str] = []
    native = _native(preset, checked.real)
    if native is not None:
        notes.append(f"{checked.real} is npm's wrapper; using the binary it runs: {native}")
        checked = CheckedExecutable(saved=native, real=native, link=checked.link or checked.real)
    args: tuple[str, ...] = preset.args
    if preset.runner is not None:
        # Started by its interpreter: the script is an argument, so it is saved by its real path.
        runner = find_on_path(preset.runner, dirs, env)
        if runner is None:
            raise AgentrtError("preset_dependency_not_found", f"the {name} preset needs {preset.runner!r} on PATH")
        script = checked.real
        checked = check_executable(runner, dirs=dirs, env=env)
        args = (script, *args)
    entries: dict[str, str] = dict(preset.env)
    copied = []
    for var in preset.reads_env:
        value = env.get(var, "")
        if value.strip():
            entries[var] = value
            copied.append(var)
    if preset.needs_claude:
        claude = env.get("CLAUDE_CODE_EXECUTABLE", "").strip() or find_on_path("claude", dirs, env)
        if claude is None:
            raise AgentrtError(
                "preset_dependency_not_found",
                f"the {name} preset runs Claude Code: put `claude` on PATH, in --dir, or set CLAUDE_CODE_EXECUTABLE",
            )
        real_claude = os.path.realpath(claude)
        _validate_executable(real_claude, "CLAUDE_CODE_EXECUTABLE")
        entries["CLAUDE_CODE_EXECUTABLE"] = real_claude
        if "CLAUDE_CODE_EXECUTABLE" in copied:
            copied.remove("CLAUDE_CODE_EXECUTABLE")
    return FilledPreset(
        executable=checked, args=args, protocol=preset.protocol, env=entries, copied=tuple(copied), notes=tuple(notes)
    )
