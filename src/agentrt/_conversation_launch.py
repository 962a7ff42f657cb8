"""What each of a conversation's agent processes is: its spec, its codec, its probe, its raw taps.

:class:`ConversationLaunch` turns one :class:`~agentrt.LaunchSpec` into what
the engine (:class:`agentrt._engine.HostedProcess`) asks for at every spawn:

* the :class:`~agentrt.lowlevel.ProcessSpec`, with the executable checked
  again right before (it may have been swapped since the launch was
  validated: a respawn comes much later) and ``--resume`` when resuming;
* a fresh host codec, started with the session to resume, the model and the
  absolute working directory (a new process speaks a new stream);
* the protocol probe of :mod:`agentrt._mismatch`;
* one :class:`~agentrt.lowlevel.RawTap` that feeds the tap of every attached
  :class:`~agentrt.lowlevel.TapSource` sink (:func:`tap_all`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import attrs

from ._launch import LaunchSpec
from ._mismatch import ProtocolProbe
from ._process import AgentProcess, ProcessSpec
from ._tap import RawTap, TapInfo, TapSource
from .dialect import Dialect, HostCodec

__all__ = ["ConversationLaunch", "tap_all"]


class ConversationLaunch:
    """The recipe for a conversation's processes (see the module doc)."""

    __slots__ = (
        "_conversation_id",
        "_cwd",
        "_first_output",
        "_parent_env",
        "_term_grace",
        "dialect",
        "launch",
        "tap_sources",
    )

    def __init__(
        self,
        launch: LaunchSpec,
        dialect: Dialect,
        *,
        conversation_id: str,
        cwd: str | None,
        parent_env: Mapping[str, str],
        term_grace: float | None,
        first_output: float | None,
    ) -> None:
        self.launch = launch
        self.dialect = dialect
        self._conversation_id = conversation_id
        self._cwd = cwd
        self._parent_env = parent_env
        self._term_grace = term_grace
        self._first_output = first_output
        #: The attached sinks that record raw bytes, asked for a tap at every spawn (a tuple: most have none).
        self.tap_sources: tuple[TapSource, ...] = ()

    def spec(self, resume: str | None, codec: HostCodec) -> ProcessSpec:
        """The next process's spec (raises as :meth:`LaunchSpec.check_executable` does)."""
        self.launch.check_executable()
        spec = self.launch.process_spec(
            self.dialect,
            resume=resume,
            cwd=self._cwd,
            parent_env=self._parent_env,
            shutdown_line=codec.encode_shutdown(),
        )
        return spec if self._term_grace is None else attrs.evolve(spec, term_grace=self._term_grace)

    def codec(self, resume: str | None) -> HostCodec:
        """A fresh host codec for the next process, started."""
        codec = self.dialect.host_codec()
        # The working directory a protocol is told (ACP's session/new wants it absolute).
        cwd = os.path.abspath(self._cwd) if self._cwd else os.getcwd()
        codec.start(resume=resume, model=self.launch.model, cwd=cwd)
        return codec

    def probe(self) -> ProtocolProbe:
        """The next process's protocol probe (its output until the dialect recognises a line)."""
        return ProtocolProbe(self.launch.protocol, self.launch.executable, self._first_output)

    def tap(self, proc: AgentProcess, number: int) -> RawTap | None:
        """The raw tap of process ``number``: every tap source's, or ``None`` when none records."""
        if not self.tap_sources:
            return None
        info = TapInfo(conversation_id=self._conversation_id, dialect=self.dialect.name, process=number, pid=proc.pid)
        return tap_all([tap for source in self.tap_sources if (tap := source.open_tap(info)) is not None])


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
