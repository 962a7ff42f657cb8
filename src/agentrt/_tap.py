"""Raw byte taps: what a conversation's agent wrote and what agentrt wrote to it, unparsed.

Contract: a sink that also implements :class:`TapSource` is asked once per
agent process for a :class:`RawTap` (``None`` declines).  The engine then
calls :meth:`RawTap.agent_output` with every chunk read from the agent's
stdout, before it is decoded, and :meth:`RawTap.agent_input` with every
write to its stdin, after it was written, in the order they happened, from
the conversation's own task and without awaiting: a tap must not block (it
appends to a file it owns) and must not raise (it reports its own failure,
e.g. as a ``recorder_failed`` diagnostic, and goes on as a no-op).
:meth:`RawTap.close` is called once when the process is done with.  The
replay of a tap's bytes through the dialect's decoder gives the events the
conversation saw.  A process has one tap: :func:`tap_all` makes it of every
tap source's, and lets go of one that raises all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs

__all__ = ["RawTap", "TapInfo", "TapSource", "tap_all"]


@attrs.frozen
class TapInfo:
    """What a tap is told about the process it records."""

    conversation_id: str
    dialect: str
    #: Counts the conversation's processes from 1 (a respawn with ``--resume`` is a new one).
    process: int
    pid: int | None = None


@runtime_checkable
class RawTap(Protocol):
    """Receives one agent process's raw bytes, in order (see the module's contract)."""

    def agent_output(self, chunk: bytes) -> None: ...

    def agent_input(self, data: bytes) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class TapSource(Protocol):
    """A sink that records raw bytes: asked for a tap per agent process."""

    def open_tap(self, info: TapInfo) -> RawTap | None: ...


def tap_all(taps: Sequence[RawTap]) -> RawTap | None:
    """One tap that feeds every tap of ``taps`` in order (``None`` for none); a tap that raises is let go."""
    if not taps:
        return None
    return _Taps(list(taps))


class _Taps:
    """Every :class:`RawTap` of one process; one that raises is dropped (the contract says it must not raise)."""

    def __init__(self, taps: list[RawTap]) -> None:
        self._taps = taps

    def _each(self, call: Callable[[RawTap], None]) -> None:
        for tap in list(self._taps):
            try:
                call(tap)
            except Exception:
                self._taps.remove(tap)

    def agent_output(self, chunk: bytes) -> None:
        self._each(lambda tap: tap.agent_output(chunk))

    def agent_input(self, data: bytes) -> None:
        self._each(lambda tap: tap.agent_input(data))

    def close(self) -> None:
        self._each(lambda tap: tap.close())
