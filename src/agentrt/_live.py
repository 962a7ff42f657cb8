"""One agent process of a conversation, read by a pump that parks while the conversation is idle.

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

from ._process import AgentProcess
from ._pump import Pump, PumpResult

__all__ = ["LiveProcess"]


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
