"""What to spawn, the spawn itself, and how it ended: the plain parts of :mod:`agentrt._process`."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Mapping
from typing import Literal

import attrs

from ._os.spawn import OwnedProcess, open_owned_process
from .errors import AgentrtError

__all__ = ["ProcessSpec", "ExitStatus", "spawn"]


@attrs.frozen(kw_only=True)
class ProcessSpec:
    """What to spawn: argv (``argv[0]`` absolute, never a shell), the complete env, cwd.

    ``stdin=False`` gives the child ``/dev/null``.  On stop, ``shutdown_line`` is
    written first (where the dialect has one); ``shutdown_grace`` and
    ``term_grace`` bound the waits before SIGTERM and SIGKILL.  Over
    ``stderr_limit`` bytes of stderr, only the last half is kept.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None = None
    stdin: bool = True
    shutdown_line: bytes | None = None
    shutdown_grace: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    term_grace: float = attrs.field(default=3.0, validator=attrs.validators.ge(0))
    stderr_limit: int = attrs.field(default=256 * 1024, validator=attrs.validators.ge(2))


@attrs.frozen(kw_only=True)
class ExitStatus:
    """How the child ended."""

    returncode: int | None
    """The exit code, or ``None`` when a signal killed it."""
    signal: int | None
    """The signal that killed it, or ``None``."""
    requested: bool
    """True if :meth:`AgentProcess.stop` was called before it exited."""

    @property
    def kind(self) -> Literal["requested", "exited", "crashed"]:
        """``requested`` (we stopped it), ``exited`` (code 0) or ``crashed`` (anything else)."""
        if self.requested:
            return "requested"
        if self.returncode == 0:
            return "exited"
        return "crashed"


async def spawn(spec: ProcessSpec) -> OwnedProcess:
    """Start ``spec``'s child (no shell, its own group, dying with its owner): ``spawn_failed`` when it cannot."""
    if not spec.argv or not os.path.isabs(spec.argv[0]):
        raise AgentrtError("spawn_failed", "argv[0] must be an absolute path")
    try:
        proc = await open_owned_process(
            spec.argv,
            stdin=subprocess.PIPE if spec.stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=spec.env,
            cwd=spec.cwd,
        )
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "error")
        raise AgentrtError("spawn_failed", f"cannot start {spec.argv[0]}: {name} ({exc.strerror})") from None
    except (ValueError, subprocess.SubprocessError) as exc:
        # e.g. an embedded NUL; the message names the problem, not the values.
        raise AgentrtError("spawn_failed", f"cannot start {spec.argv[0]}: {type(exc).__name__}") from None
    return proc
