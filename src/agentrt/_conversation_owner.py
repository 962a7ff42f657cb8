"""A conversation's side of its engine: the :class:`~agentrt.lowlevel.ProcessOwner` it gives it.

:class:`ConversationOwner` is what the engine (:class:`agentrt._engine.HostedProcess`)
asks at every spawn and tells of every process:

* the :class:`~agentrt.lowlevel.ProcessSpec`, with the executable checked
  again right before (it may have been swapped since the launch was
  validated: a respawn comes much later) and ``--resume`` when resuming;
* a fresh host codec, started with the session to resume, the model and the
  absolute working directory (a new process speaks a new stream);
* the protocol probe of :mod:`agentrt._protocol_mismatch`, and one
  :class:`~agentrt.lowlevel.RawTap` that feeds the tap of every attached
  :class:`~agentrt.lowlevel.TapSource` sink (:func:`tap_all`);
* each chunk's events (and the conversation's own, such as ``TurnStarted``)
  through the turn rules to the turn in flight, as one
  :class:`~agentrt.events.EventBatch` to the fan-out, control requests to
  :func:`agentrt._control_answer.answer_control`; and what an oversize line, a
  failed write, a wrong protocol or the process's end mean for the live turn.

One small slotted object per conversation: the engine holds it instead of a
bound method per callback.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from ._control_answer import answer_control
from ._engine import ProcessEnd
from ._exit_reason import exit_reason
from ._fanout import CLOSE_TIMEOUT, Fanout
from ._process import AgentProcess, ProcessSpec
from ._protocol_mismatch import ProtocolProbe
from ._tap import RawTap, TapInfo, TapSource
from ._turn_rules import exit_how
from .dialect import HostCodec
from .errors import AgentrtError
from .events import ControlRequest, Diagnostic, Event, EventBatch, TurnFailed

if TYPE_CHECKING:
    from ._conversation import Conversation

__all__ = ["ConversationOwner", "tap_all"]


class ConversationOwner:
    """The engine's owner for one conversation (see the module doc); a :class:`~agentrt.lowlevel.ProcessOwner`."""

    __slots__ = (
        "_conv",
        "_cwd",
        "_first_output",
        "_internal",
        "_parent_env",
        "_seq",
        "_term_grace",
        "fanout",
        "tap_sources",
    )

    def __init__(
        self,
        conv: Conversation,
        *,
        cwd: str | None,
        parent_env: Mapping[str, str],
        term_grace: float | None,
        first_output: float | None,
    ) -> None:
        self._conv = conv
        self._cwd = cwd
        self._parent_env = parent_env
        self._term_grace = term_grace
        self._first_output = first_output
        #: The attached sinks that record raw bytes, asked for a tap at every spawn (a tuple: most have none).
        self.tap_sources: tuple[TapSource, ...] = ()
        self._seq = 0  # the next batch's first sequence number
        self._internal: list[Event] = []  # the conversation's own diagnostics (a failed sink, a control answer's)
        #: The conversation's sinks, each fed by its own task.
        self.fanout = Fanout(conv._nursery, on_failure=self._internal.append, close_timeout=CLOSE_TIMEOUT)

    # -- what each process is ------------------------------------------------
    async def launch(self, resume: str | None, codec: HostCodec) -> ProcessSpec:
        """The next process's spec (raises as :meth:`LaunchSpec.check_executable` does)."""
        launch = self._conv.launch
        launch.check_executable()
        spec = launch.process_spec(
            self._conv.dialect,
            resume=resume,
            cwd=self._cwd,
            parent_env=self._parent_env,
            shutdown_line=codec.encode_shutdown(),
        )
        return spec if self._term_grace is None else attrs.evolve(spec, term_grace=self._term_grace)

    def new_codec(self, resume: str | None) -> HostCodec:
        """A fresh host codec for the next process, started."""
        codec = self._conv.dialect.host_codec()
        # The working directory a protocol is told (ACP's session/new wants it absolute).
        cwd = os.path.abspath(self._cwd) if self._cwd else os.getcwd()
        codec.start(resume=resume, model=self._conv.launch.model, cwd=cwd)
        return codec

    def probe(self) -> ProtocolProbe:
        """The process's protocol probe (its output until the dialect recognises a line)."""
        launch = self._conv.launch
        return ProtocolProbe(launch.protocol, launch.executable, self._first_output)

    def tap(self, process: AgentProcess, number: int) -> RawTap | None:
        """The raw tap of process ``number``: every tap source's, or ``None`` when none records."""
        if not self.tap_sources:
            return None
        conv = self._conv
        info = TapInfo(conversation_id=conv.id, dialect=conv.dialect.name, process=number, pid=process.pid)
        return tap_all([tap for source in self.tap_sources if (tap := source.open_tap(info)) is not None])

    # -- what it does, for the live turn -------------------------------------
    def idle(self) -> bool:
        """No live turn: nothing waits on the output, so the read loop may park."""
        turn = self._conv._turn
        return turn is None or turn.progress.terminal is not None

    async def on_spawn(self, process: AgentProcess) -> None:
        """A new process: the turn rules start afresh."""
        self._conv._rules.new_process()

    async def on_events(self, events: Sequence[Event]) -> None:
        """A chunk's events, or the conversation's own: through the turn rules to the turn and the sinks."""
        conv = self._conv
        state = conv._turn
        out, for_turn, controls = conv._rules.apply(events)
        if self._internal:
            # A new list: `out` may be the very list handed to the turn's consumer.
            out = out + self._internal
            self._internal.clear()
        if not out:
            return
        batch = EventBatch(
            source=conv.id, first_seq=self._seq, mono=trio.current_time(), wall=time.time(), events=tuple(out)
        )
        self._seq += len(out)
        if state is not None and for_turn:
            state.send.send_nowait(for_turn)
            if state.progress.terminal is not None:
                state.ended.set()
                state.send.close()
                if conv._turn is state:
                    conv._turn = None
        await self.fanout.send(batch)
        for req in controls:
            conv._nursery.start_soon(self._answer_control, req)

    async def fail(self, code: str, message: str) -> None:
        """End the turn in flight, if any, with this failure."""
        await self.on_events(self._conv._rules.fail_current(code, message))

    async def _answer_control(self, req: ControlRequest) -> None:
        conv = self._conv
        proc, codec = conv._engine.process, conv._engine.codec
        if proc is None or codec is None:
            return
        await answer_control(req, codec=codec, policy=conv._policy, send=proc.send, report=self._internal.append)

    async def close_sinks(self, deadline: float) -> None:
        """Deliver what is still held, then close the fan-out, all by ``deadline`` (shielded by the caller)."""
        with trio.move_on_at(deadline):
            # Whatever the pump could not deliver is lost only if a sink hangs past the deadline.
            if self._internal:
                await self.on_events([])
        await self.fanout.aclose(deadline=deadline)

    async def on_send_error(self, error: AgentrtError) -> None:
        """A write the codec owed the agent failed: the live turn fails with its code."""
        await self.fail(error.code, error.detail or error.code)

    async def on_mismatch(self, failure: TurnFailed) -> None:
        """No recognised output within the first-output bound: the live turn fails ``protocol_mismatch``."""
        await self.fail(failure.code, failure.message)

    async def on_oversize(self, process: AgentProcess, before: list[Event]) -> bool:
        """A line past the cap: stop the agent (a next turn must not be written to it) and fail the turn."""
        with trio.CancelScope(shield=True):
            await process.stop()
        conv = self._conv
        await self.on_events(
            before
            + [Diagnostic(code="runtime_output_oversize", detail="stdout line exceeded 4 MiB; stopping the agent")]
            + conv._rules.fail_current("runtime_output_oversize", "the agent's output exceeded 4 MiB without a newline")
        )
        return False

    async def on_exit(self, end: ProcessEnd) -> None:
        """How the process ended decides the live turn's fate."""
        conv = self._conv
        if end.failure is not None:
            await self.fail(end.failure.code, end.failure.detail or end.failure.code)
        status, turn = end.status, conv._turn
        ours = turn is not None and turn.proc is end.process
        reason = None
        ending = turn is not None and ours and turn.progress.live
        if ending and turn is not None and not (turn.progress.cancel_requested or status.requested):
            reason = await exit_reason(end.process, exit_how(status))  # the agent's last stderr lines say why
        await self.on_events(conv._rules.at_exit(status, ours=ours, reason=reason))


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
