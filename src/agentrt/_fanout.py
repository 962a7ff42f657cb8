"""Fan-out of event batches to sinks: one task and one bounded buffer per sink.

Used by :class:`~agentrt.Conversation` and by the FastAgent bot supervisor.
A batch a sink fails on is a ``sink_failed`` diagnostic (and a line on
stderr), and later batches are still delivered: one odd event must not
silently end the recording.  After :data:`MAX_SINK_FAILURES` failures in a
row the sink is detached (``sink_detached``).  Failures are reported through
the owner's ``on_failure`` callback, so the owner decides where the
diagnostic goes (a conversation puts it in its next batch).

A sink that raises :class:`~agentrt.errors.AgentrtError` with code
``recorder_failed`` has given up on its own (the database sink on a full disk
or an unwritable directory): it is detached at once with one
``recorder_failed`` diagnostic and one stderr line, and it does not count as
missing output (``failures``), since what it gave up is only the record.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import trio

from .errors import AgentrtError
from .events import Diagnostic, Event, EventBatch, TextDelta
from .sinks import Sink

__all__ = ["Fanout", "MAX_SINK_FAILURES", "RECORDER_FAILED", "merge_batches"]

RECORDER_FAILED = "recorder_failed"
"""The code a sink raises to say it stopped recording for good (see the module docstring)."""

MAX_SINK_FAILURES = 3
"""A sink that fails this many batches in a row is detached."""


class _Runner:
    """One attached sink: its own task, its own bounded buffer and policy."""

    def __init__(self, fanout: Fanout, sink: Sink, coalesce: bool) -> None:
        self.fanout = fanout
        self.sink = sink
        self.failed = False  # detached
        self.gave_up = False  # detached by its own recorder_failed
        self.failures = 0  # in a row
        self.failed_batches = 0  # in all, closing included
        # ``policy``, ``buffer_size`` and ``name`` are required members of Sink (check_sink asserts them).
        self.coalesce = coalesce and sink.policy == "coalesce"
        self.size = max(1, int(sink.buffer_size))
        self.send, self.recv = trio.open_memory_channel[EventBatch](self.size)
        self.pending: list[EventBatch] = []
        self.wake = trio.Event()
        self.closed = False
        self.done = trio.Event()

    @property
    def name(self) -> str:
        return str(self.sink.name)

    async def deliver(self, batch: EventBatch) -> None:
        if self.failed or self.closed:
            return
        if self.coalesce:
            self.pending.append(batch)
            if len(self.pending) > self.size:
                # Falling behind: merge what waits instead of slowing the agent.
                self.pending = [merge_batches(self.pending)]
            self.wake.set()
        else:
            try:
                # Without a schedule point while the buffer has room: the producer (a pump)
                # already yields at every read, and a second yield per batch was a whole
                # trip through trio's scheduler. Waits, as send does, only when it is full.
                self.send.send_nowait(batch)
            except trio.WouldBlock:
                try:
                    await self.send.send(batch)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    self.failed = True
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self.failed = True

    def close(self) -> None:
        self.closed = True
        if self.coalesce:
            self.wake.set()
        else:
            self.send.close()

    async def run(self) -> None:
        try:
            if self.coalesce:
                while True:
                    await self.wake.wait()
                    self.wake = trio.Event()
                    batches, self.pending = self.pending, []
                    if batches:
                        await self._handle(merge_batches(batches) if len(batches) > 1 else batches[0])
                    if self.closed and not self.pending:
                        break
            else:
                async with self.recv:
                    # The loop keeps draining (without handling once detached), so a
                    # producer that blocks on this buffer is never stuck behind a dead sink.
                    async for batch in self.recv:
                        await self._handle(batch)
        finally:
            self.done.set()

    async def _handle(self, batch: EventBatch) -> None:
        if self.failed:
            return
        try:
            await self.sink.handle(batch)
        except Exception as exc:
            self.record_failure(exc, f"events {batch.first_seq}..{batch.first_seq + len(batch.events) - 1}")
        else:
            self.failures = 0

    def record_failure(self, exc: Exception, what: str) -> None:
        """Report one failure of the sink; detach it after too many in a row."""
        if self.gave_up:
            return  # said once already: its close failing too says nothing new
        if isinstance(exc, AgentrtError) and exc.code == RECORDER_FAILED:
            self.failed = self.gave_up = True
            print(f"agentrt: warning: {RECORDER_FAILED}: {exc.detail}", file=sys.stderr)
            self.fanout._report(Diagnostic(code=RECORDER_FAILED, detail=exc.detail))
            return
        self.failures += 1
        self.failed_batches += 1
        cause = f"{type(exc).__name__}: {exc}"
        if self.failures >= self.fanout.max_failures:
            self.failed = True
            code = "sink_detached"
            times = f" {self.failures} times in a row" if self.failures > 1 else ""
            detail = f"sink {self.name!r} failed{times} and was detached: {cause}"
        else:
            code = "sink_failed"
            detail = f"sink {self.name!r} failed on {what} ({self.failures} in a row): {cause}"
        print(f"agentrt: warning: {code}: {detail}", file=sys.stderr)
        self.fanout._report(Diagnostic(code=code, detail=detail))


CLOSE_TIMEOUT = 10.0
"""The bound on leaving ``open_conversation``, whatever the agent and the sinks do (the agent's
bounded stop first, then the sinks' drain and close in what is left of it)."""

CLOSE_RESERVE = 2.0
"""Seconds of a close's deadline kept for the sinks' ``aclose`` (draining ends that much earlier)."""


class Fanout:
    """Deliver batches to every attached sink in order, each sink in its own task.

    ``on_failure`` receives each ``sink_failed`` / ``sink_detached``
    diagnostic (it is also printed on stderr).  ``coalesce=False`` ignores the
    sinks' ``coalesce`` policy, for a fan-out that carries batches of several
    sources (which must not be merged): every sink then waits when its buffer
    is full.  A sink is detached after ``max_failures`` failed batches in a row.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        sinks: Sequence[Sink] = (),
        *,
        on_failure: Callable[[Diagnostic], None] | None = None,
        coalesce: bool = True,
        close_timeout: float = 10.0,
        max_failures: int = MAX_SINK_FAILURES,
    ) -> None:
        self.max_failures = max(1, max_failures)
        self._nursery = nursery
        self._on_failure = on_failure
        self._coalesce = coalesce
        self._close_timeout = close_timeout
        self._runners: list[_Runner] = []
        for sink in sinks:
            self.attach(sink)

    def attach(self, sink: Sink) -> None:
        """Deliver every later batch to ``sink`` too."""
        runner = _Runner(self, sink, self._coalesce)
        self._runners.append(runner)
        self._nursery.start_soon(runner.run)

    @property
    def failures(self) -> dict[str, int]:
        """Sinks that failed at least once: name → failed batches (closing included)."""
        return {r.name: r.failed_batches for r in self._runners if r.failed_batches}

    async def send(self, batch: EventBatch) -> None:
        """Hand ``batch`` to every live sink (waits while a ``block`` sink's buffer is full)."""
        for runner in self._runners:
            await runner.deliver(batch)

    async def aclose(self, *, deadline: float | None = None) -> None:
        """Let every sink drain its buffer, then close it; shielded, and done by one deadline.

        The whole close (draining, then every sink's ``aclose``, side by side)
        ends by ``deadline`` (``trio.current_time()`` clock; default:
        ``close_timeout`` from now), whatever the sinks do; draining stops
        :data:`CLOSE_RESERVE` before it, so the ``aclose`` calls always get
        that long.  A sink still closing at the deadline is cancelled (and one
        still handling when the caller cancels the nursery the fan-out runs in).
        """
        if deadline is None:
            deadline = trio.current_time() + self._close_timeout
        with trio.CancelScope(shield=True):
            for runner in self._runners:
                runner.close()
            # A sink stuck in handle must not leave the others no time to close.
            with trio.move_on_at(deadline - min(CLOSE_RESERVE, self._close_timeout / 2)):
                for runner in self._runners:
                    await runner.done.wait()
            with trio.move_on_at(deadline):
                # Side by side: a sink that never returns takes no time from the others.
                async with trio.open_nursery() as nursery:
                    for runner in self._runners:
                        nursery.start_soon(self._close_sink, runner)

    @staticmethod
    async def _close_sink(runner: _Runner) -> None:
        try:
            await runner.sink.aclose()
        except Exception as exc:
            runner.record_failure(exc, "closing")

    def _report(self, diagnostic: Diagnostic) -> None:
        if self._on_failure is not None:
            self._on_failure(diagnostic)


def merge_batches(batches: Sequence[EventBatch]) -> EventBatch:
    """Coalesce batches of one source: adjacent text deltas of one block are concatenated."""
    events: list[Event] = []
    # The texts of the run of deltas ending ``events``, joined once when the run ends: adding
    # each to the last would copy the run's text so far per delta (quadratic in a lagging sink).
    run: list[str] = []
    run_index = 0
    for b in batches:
        for ev in b.events:
            if type(ev) is TextDelta:
                if run and ev.index == run_index:
                    run.append(ev.text)
                    continue
                if len(run) > 1:
                    events[-1] = TextDelta(text="".join(run), index=run_index)
                run, run_index = [ev.text], ev.index
            elif run:
                if len(run) > 1:
                    events[-1] = TextDelta(text="".join(run), index=run_index)
                run = []
            events.append(ev)
    if len(run) > 1:
        events[-1] = TextDelta(text="".join(run), index=run_index)
    first = batches[0]
    last = batches[-1]
    return EventBatch(
        source=first.source, first_seq=first.first_seq, mono=last.mono, wall=last.wall, events=tuple(events)
    )
