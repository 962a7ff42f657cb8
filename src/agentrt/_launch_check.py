"""The launch contract's executable check, and the memo that lets later spawns skip it.

:func:`check_executable_file` is the full check (absolute, present, not a
symlink, a regular file, executable) with the launch contract's error codes; it
returns what its ``lstat`` saw.  :class:`LaunchMemo` keeps that verdict per
:class:`~agentrt.LaunchSpec`: while one ``lstat`` of the path shows the same
file the verdict stands, anything else is checked in full again.  It also keeps
the child environment last built, keyed by the parent values it was built from.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from .errors import AgentrtError

__all__ = ["StatKey", "LaunchMemo", "check_executable_file", "stat_key"]

# What a full check of an executable saw (lstat): a later spawn whose one lstat
# gives the same tuple runs the same file with the same permissions (a swap, a
# chmod, a chown or a write changes the inode, the mode or the times).
StatKey = tuple[int, int, int, int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    """The parts of an ``lstat`` that identify the file and its permissions."""
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid, st.st_gid)


def check_executable_file(value: str, source: str) -> tuple[str, StatKey]:
    """The normalised path of ``value`` (already trimmed) and what its ``lstat`` saw.

    Raises ``cli_executable_not_found`` (empty, missing, unreadable),
    ``cli_executable_must_be_absolute``, ``cli_executable_is_symlink``,
    ``cli_executable_not_regular_file`` or ``cli_executable_not_executable``;
    ``source`` names the setting in the error, never its value.
    """
    if not value:
        raise AgentrtError("cli_executable_not_found", f"{source} is not set")
    if not os.path.isabs(value):
        raise AgentrtError("cli_executable_must_be_absolute", f"{source} must be an absolute path")
    path = os.path.normpath(value)  # like path.resolve(): lexical, symlinks untouched
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise AgentrtError("cli_executable_not_found", f"no such file: {path}") from None
    except OSError as exc:
        raise AgentrtError("cli_executable_not_found", f"cannot stat {path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise AgentrtError("cli_executable_is_symlink", f"{path} is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise AgentrtError("cli_executable_not_regular_file", f"{path} is not a regular file")
    if not os.access(path, os.X_OK):
        raise AgentrtError("cli_executable_not_executable", f"{path} is not executable")
    return path, stat_key(st)


class LaunchMemo:
    """What a :class:`~agentrt.LaunchSpec` works out once, not per spawn.

    Each entry is replaced whole, never changed in place (threads may share it).
    """

    __slots__ = ("env", "exe")

    def __init__(self) -> None:
        #: The executable's normalised path and its ``lstat`` at the last full check that passed.
        self.exe: tuple[str, StatKey] | None = None
        #: The parent's allow-listed values last seen, and the child environment built from them.
        self.env: tuple[tuple[str | None, ...], Mapping[str, str]] | None = None

    def __reduce__(self) -> tuple[type[LaunchMemo], tuple[()]]:
        # A copied or unpickled spec starts afresh: it checks its file itself (and a
        # read-only mapping cannot be pickled).
        return LaunchMemo, ()

    def recheck(self, full_check: Callable[[], tuple[str, StatKey]]) -> None:
        """Keep the last verdict if one ``lstat`` shows the same file, else run ``full_check`` and keep its result.

        ``full_check`` raises when the file fails; the memo is then empty.
        """
        last = self.exe
        if last is not None:
            try:
                if stat_key(os.lstat(last[0])) == last[1]:
                    return
            except OSError:
                pass  # gone or unreadable: the full check names it
        self.exe = None
        self.exe = full_check()

    def child_env(
        self, parent_env: Mapping[str, str], keys: Sequence[str], build: Callable[[Mapping[str, str]], dict[str, str]]
    ) -> Mapping[str, str]:
        """``build(parent_env)`` as a read-only mapping, built again only when a value of ``keys`` changed."""
        seen = tuple(map(parent_env.get, keys))
        last = self.env
        if last is not None and last[0] == seen:
            return last[1]
        env = MappingProxyType(build(parent_env))
        self.env = (seen, env)
        return env
