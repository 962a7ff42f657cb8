"""What to spawn and how it ended: the plain values of :mod:`agentrt._process`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs

__all__ = ["ProcessSpec", "ExitStatus"]


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
