"""One watcher per trio run for every child's exit and stderr (Linux): no task per child.

Each :class:`~agentrt._process.AgentProcess` needs to notice its child's exit
(a pidfd becomes readable) and to keep draining its stderr.  A trio task
waiting on each costs a task, a cancel scope and a nursery per child: about
8 KiB of the parent's memory each, with a thousand children held idle.  Here
one system task per run waits on one ``epoll`` descriptor that holds every
registered descriptor, and calls the registered function when one is
readable, in the run's own thread.  A function must not block; the level-
triggered ``epoll`` calls it again while its descriptor stays readable.

The same task keeps timers (:meth:`ChildWatcher.call_later`): a deadline
that once needed a sleeping task per child (e.g. "end the output a grace
period after the exit") is an entry in one heap instead.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import select
from collections.abc import Callable

import trio

__all__ = ["ChildWatcher", "current_watcher", "AVAILABLE"]

AVAILABLE = hasattr(select, "epoll")
"""True where the shared watcher runs (Linux); elsewhere each child has its own tasks."""

# How many ready descriptors one wake-up handles before yielding to other tasks.
_BATCH = 256


class ChildWatcher:
    """Calls ``callback()`` whenever a registered descriptor is readable (see the module doc)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._callbacks: dict[int, Callable[[], None]] = {}
        # (deadline, tie-breaker, callback); the tie-breaker keeps callbacks uncompared.
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._sleep: trio.CancelScope | None = None

    def add(self, fd: int, callback: Callable[[], None]) -> None:
        """Watch ``fd``; ``callback`` runs in the run's thread, and must not raise or block."""
        self._callbacks[fd] = callback
        self._epoll.register(fd, select.EPOLLIN)

    def remove(self, fd: int) -> None:
        """Stop watching ``fd`` (idempotent); call it before closing ``fd``."""
        if self._callbacks.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        """Call ``callback()`` about ``delay`` seconds from now, in the run's thread (must not raise or block)."""
        deadline = trio.current_time() + max(0.0, delay)
        heapq.heappush(self._timers, (deadline, next(self._seq), callback))
        if self._sleep is not None and deadline < self._sleep.deadline:
            self._sleep.deadline = deadline

    def _fire_timers(self) -> None:
        now = trio.current_time()
        timers = self._timers
        while timers and timers[0][0] <= now:
            callback = heapq.heappop(timers)[2]
            with contextlib.suppress(Exception):  # one failing timer must not end the others
                callback()

    async def _run(self) -> None:
        try:
            while True:
                # One scope per wake-up, not per child: its deadline is the next timer's.
                with trio.CancelScope(deadline=self._timers[0][0] if self._timers else math.inf) as sleep:
                    self._sleep = sleep
                    await trio.lowlevel.wait_readable(self._epoll)
                self._sleep = None
                self._fire_timers()
                for fd, _events in self._epoll.poll(0, _BATCH):
                    callback = self._callbacks.get(fd)
                    if callback is None:
                        continue
                    try:
                        callback()
                    except Exception:
                        # A failing callback must not end the watcher for every other child.
                        self.remove(fd)
        finally:
            trio.lowlevel.notify_closing(self._epoll)
            self._epoll.close()


_current: trio.lowlevel.RunVar[ChildWatcher] = trio.lowlevel.RunVar("agentrt_child_watcher")


def current_watcher() -> ChildWatcher:
    """This run's watcher, started (as a system task) on first use."""
    try:
        return _current.get()
    except LookupError:
        watcher = ChildWatcher()
        trio.lowlevel.spawn_system_task(watcher._run, name="agentrt child watcher")
        _current.set(watcher)
        return watcher
