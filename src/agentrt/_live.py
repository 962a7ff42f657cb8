"""A read loop's task: parked while its conversation is idle (:class:`LiveProcess`), or one to the end.

:func:`pump_events` runs a :class:`~agentrt._wire.Pump` to the end of the
output in the caller's task (the one-call read loop of :mod:`agentrt.lowlevel`);
where the run has no watcher, it keeps the exit grace with a timer task of its own.

A thousand idle conversations should cost their parent little more than a
thousand processes.  A task blocked on each stdout (its coroutine frames, its
nursery, the exit-grace timer beside it) was most of the difference, so
between turns the pump's task ends: the stdout descriptor waits in the run's
one watcher (:meth:`AgentProcess.park_stdout`), which starts the task again
in the conversation's nursery as soon as there is output (or its end).
While a turn is live the task reads on as before, one blocking read per
chunk, so streaming costs nothing extra.

The process's context (:func:`open_process`) is entered by whoever spawns
it (the engine, :class:`agentrt._engine.HostedProcess`) and left by the
pump's last task once the output has ended, or by the engine when it closes
while the pump is parked (then no task would ever run again to leave it).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import trio

from ._exception_groups import collapse_single_group
from ._process import AgentProcess
from ._wire import EXIT_OUTPUT_GRACE, Pump, PumpResult
from .dialect import HostCodec
from .errors import AgentrtError
from .events import Event

__all__ = ["LiveProcess", "pump_events"]


async def pump_events(
    proc: AgentProcess,
    codec: HostCodec,
    on_events: Callable[[list[Event]], Awaitable[None]],
    *,
    on_oversize: Callable[[list[Event]], Awaitable[bool]],
    on_send_error: Callable[[AgentrtError], Awaitable[None]] | None = None,
    exit_grace: float = EXIT_OUTPUT_GRACE,
) -> PumpResult:
    """Read ``proc``'s stdout until it ends, handing each chunk's events to ``on_events``.

    * A chunk's complete lines go to the codec's one decode method,
      :meth:`~agentrt.dialect.HostCodec.decode_lines`, as bytes; the lines it
      does not take itself are parsed by the framing and given to
      :meth:`~agentrt.dialect.HostCodec.decode`, and a line that is not JSON
      is a ``malformed_output_line`` diagnostic in its place.  ``on_events``
      gets one list per chunk that completed a line, in order (possibly
      empty: lines that decode to nothing).
    * A line past :data:`~agentrt.lowlevel.MAX_LINE_BYTES`: ``on_oversize``
      gets the events of the lines before it in the same chunk and answers
      whether to read on (with fresh framing, the rest of the long line then
      arriving as ordinary lines) or to stop (the tail is then not decoded).
    * After each decoded chunk, what the codec owes the agent
      (:meth:`~agentrt.dialect.HostCodec.drain_output`) is written; a write
      failure goes to ``on_send_error`` (raised when there is none).
    * At end of output the unterminated last line and the codec's
      :meth:`~agentrt.dialect.HostCodec.finish` events are handed over.
    * Once the process has exited, reading ends ``exit_grace`` seconds later
      at the latest (:meth:`AgentProcess.end_output`).
    """
    pump = Pump(proc, codec, on_events, on_oversize=on_oversize, on_send_error=on_send_error, exit_grace=exit_grace)
    if pump.timed_by_watcher:
        result = await pump.run()
        assert result is not None
        return result
    cut = False

    async def end_output_after_exit() -> None:
        # Races the exit against end of output without a cost per chunk: the
        # loop reads on undisturbed until the grace after the exit is over.
        nonlocal cut
        await proc.exited.wait()
        await trio.sleep(exit_grace)
        cut = True
        await proc.end_output()

    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(end_output_after_exit)
            try:
                oversize = await pump.read(None)
            finally:
                nursery.cancel_scope.cancel()
    return PumpResult(eof=not cut and not oversize, oversize=bool(oversize))


class LiveProcess:
    """A spawned process, its pump, and the end of both (see the module doc)."""

    def __init__(
        self,
        proc: AgentProcess,
        context: AbstractAsyncContextManager[AgentProcess],
        pump: Pump,
        *,
        nursery: trio.Nursery,
        idle: Callable[[], bool],
        after_output: Callable[[AgentProcess, PumpResult], Awaitable[None]],
        park_until_exit: bool = True,
    ) -> None:
        self.proc = proc
        #: Set once the output has been handled and the process context left.
        self.done = trio.Event()
        self._context = context
        self._pump = pump
        self._nursery = nursery
        self._idle = idle
        self._after_output = after_output
        self._park_until_exit = park_until_exit
        self._closing = False
        self._running = False  # a task of ours runs (or is about to)
        self._result: PumpResult | None = None  # once the output has ended
        # A task started from the watcher would inherit the watcher's context variables:
        # the pump's tasks get those of whoever opened the conversation instead.
        self._context_vars = contextvars.copy_context()

    def start(self) -> None:
        """Begin reading: parked at once where the conversation is idle, else in a task."""
        if not self._park():
            self._wake()

    @property
    def parked(self) -> bool:
        """True while no task of ours runs and the process context is still open."""
        return not self._running and not self._closing

    def _park(self) -> bool:
        return self._idle() and self.proc.park_stdout(self._wake)

    def _wake(self) -> None:
        # Called by the watcher (or right away): the task runs in the conversation's nursery.
        self._running = True
        self._context_vars.run(self._nursery.start_soon, self._pump_task)

    async def _pump_task(self) -> None:
        parked = False
        try:
            if self._result is None:
                self._result = await self._pump.run(self._park, self._idle)
                if self._result is None:
                    parked = True
                    return
                if self._park_until_exit and self.proc.call_on_exit(self._wake):
                    # The output ended but the agent lives on: its exit wakes us, no task waits.
                    parked = True
                    return
            await self._after_output(self.proc, self._result)
        finally:
            if parked:
                self._running = False
            else:
                await self.close()

    async def close(self) -> None:
        """Leave the process context (stop, reap, close the pipes): once, shielded."""
        if self._closing:
            return
        self._closing = True
        try:
            with trio.CancelScope(shield=True):
                await self._context.__aexit__(None, None, None)
        finally:
            self.done.set()
