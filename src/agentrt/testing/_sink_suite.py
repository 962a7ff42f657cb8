"""``check_sink``: the conformance suite every sink should pass.

A sink author runs it against a factory of fresh sinks::

    from agentrt.testing import check_sink

    async def test_my_sink_conforms():
        await check_sink(lambda: MySink())

It checks the contract of :class:`agentrt.sinks.Sink`: valid ``name``,
``policy`` and ``buffer_size``; every event type (and an unknown, third-party
event type) is accepted; batches from several sources are handled in order
(verified through ``observe`` when the sink can report what it stored); the
trio thread is never blocked for long (a heartbeat task runs while the sink
works); ``aclose`` is bounded and idempotent.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import attrs
import trio
import trio.lowlevel

from ..events import (
    EVENT_TYPES,
    ControlRequest,
    Diagnostic,
    Event,
    EventBatch,
    Lifecycle,
    ProcessExited,
    RawEvent,
    SessionStarted,
    StateChanged,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)
from ..sinks import Sink

__all__ = ["check_sink", "sample_events"]

SinkMaker = Callable[[], "Sink | Awaitable[Sink]"]
Observer = Callable[[Sink], Awaitable[Sequence[tuple[str, int]]]]


@attrs.frozen(kw_only=True)
class _ThirdPartyEvent(Event):
    """An event type no built-in sink knows: sinks must accept it."""

    type: ClassVar[str] = "x_third_party"
    payload: Any = None


def sample_events() -> list[Event]:
    """One event of every built-in type (with awkward values), plus an unknown type."""
    return [
        SessionStarted(session_id="sess-1", model="m", raw={"type": "system"}),
        TurnStarted(turn=1, prompt="héllo\n\x00 world"),
        TextDelta(text="reply “text” 日本語 \x1b[31m", index=0),
        ThinkingDelta(text="hmm"),
        ToolUse(id="t1", name="Bash", input={"command": "echo hi", "n": [1, 2.5, None]}, summary="echo hi"),
        ToolResult(tool_use_id="t1", content=[{"type": "text", "text": "hi"}], is_error=False),
        Status(kind="rate_limit", label="waiting 3 s", detail={"retry_after": 3}),
        ControlRequest(request_id="r1", subtype="can_use_tool", request={"tool_name": "Bash"}),
        TurnCompleted(session_id="sess-1", usage=Usage(input_tokens=12, output_tokens=2), result="ok"),
        TurnStarted(turn=2, prompt="again"),
        TurnFailed(code="turn_cancelled", message="cancelled", usage=None),
        Diagnostic(code="malformed_output_line", detail="malformed stdout line #1: {oops"),
        RawEvent(name="mystery", raw={"type": "mystery", "nested": {"deep": [1, {"x": "y"}]}}),
        Lifecycle(kind="process_started", message="up", pid=123, timestamp="2026-01-01T00:00:00Z",
                  data={"k": "v"}, agent_id="bot-1"),
        StateChanged(state="running", previous="starting", reason="steady"),
        ProcessExited(returncode=0, signal=None, requested=True),
        _ThirdPartyEvent(payload={"anything": ["goes", 1]}),
    ]


async def _make(factory: SinkMaker) -> Sink:
    made = factory()
    sink = await made if inspect.isawaitable(made) else made
    return sink


def _check_attributes(sink: Sink) -> None:
    assert isinstance(getattr(sink, "name", None), str) and sink.name, "sink.name must be a non-empty str"
    assert sink.policy in ("block", "coalesce"), (
        f"sink.policy must be 'block' or 'coalesce', not {sink.policy!r}"
    )
    size = sink.buffer_size
    assert isinstance(size, int) and not isinstance(size, bool) and size >= 1, (
        f"sink.buffer_size must be an int >= 1, not {size!r}"
    )
    assert inspect.iscoroutinefunction(sink.handle), "sink.handle must be an async method"
    assert inspect.iscoroutinefunction(sink.aclose), "sink.aclose must be an async method"


class _Heartbeat:
    """Ticks every ``interval`` and records the longest gap the trio thread gave it."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.max_gap = 0.0

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        last = trio.current_time()
        task_status.started()
        while True:
            await trio.sleep(self.interval)
            now = trio.current_time()
            self.max_gap = max(self.max_gap, now - last - self.interval)
            last = now


def _batches(source: str, count: int, *, first_seq: int = 0, big: bool = False) -> list[EventBatch]:
    events = sample_events()
    out: list[EventBatch] = []
    seq = first_seq
    for i in range(count):
        evs: tuple[Event, ...]
        if big and i == count // 2:
            evs = (ToolResult(tool_use_id="big", content="x" * 1_000_000),)
        else:
            deltas = [TextDelta(text=f"{source} delta {seq + j} ") for j in range(8)]
            evs = (*deltas, events[i % len(events)])
        out.append(EventBatch(source=source, first_seq=seq, mono=trio.current_time(),
                              wall=1_700_000_000.0 + seq, events=evs))
        seq += len(evs)
    return out


async def check_sink(
    factory: SinkMaker,
    *,
    observe: Observer | None = None,
    max_block: float | None = None,
    close_timeout: float = 15.0,
    batches: int = 300,
) -> None:
    """Run the sink conformance suite; raises ``AssertionError`` naming the broken rule.

    ``factory()`` (sync or async) returns a fresh sink each time it is called.
    ``observe(sink)``, when given, is awaited after ``aclose`` and returns the
    ``(source, seq)`` of every event the sink kept, in the order it kept them;
    the suite then checks that nothing was lost or reordered.  ``max_block``,
    when given, is the longest the sink may hold the trio thread in one go
    (seconds).  It is a wall-clock bound, so it is off by default: on a loaded
    machine the scheduler alone can stall the heartbeat past any fixed bound.
    Set it where the machine is quiet (a benchmark) or to prove that a sink
    which really blocks (a synchronous 300 ms write) is caught.
    """
    # 1. Attributes, every event type, and close idempotence, on a first sink.
    sink = await _make(factory)
    _check_attributes(sink)
    events = sample_events()
    known = {type(e).type for e in events}
    missing = set(EVENT_TYPES) - known
    assert not missing, f"suite out of date: no sample for {sorted(missing)}"
    with trio.fail_after(close_timeout):
        for i, ev in enumerate(events):
            await sink.handle(EventBatch(source="conformance-types", first_seq=i, mono=trio.current_time(),
                                         wall=1_700_000_000.0 + i, events=(ev,)))
        await sink.handle(EventBatch(source="conformance-types", first_seq=len(events),
                                     mono=trio.current_time(), wall=1_700_000_100.0, events=()))
    await _close_twice(sink, close_timeout)
    if observe is not None:
        seen = list(await observe(sink))
        want = [("conformance-types", i) for i in range(len(events))]
        assert seen == want, f"events of every type: sink kept {seen[:5]}... instead of {want[:5]}..."

    # 2. Order across interleaved sources, while a heartbeat watches the trio thread.
    sink = await _make(factory)
    sources = ("conformance-a", "conformance-b")
    plans = {s: _batches(s, batches, big=(s == "conformance-a")) for s in sources}
    beat = _Heartbeat(0.005)
    sent: list[tuple[str, int]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(beat.run)
        with trio.fail_after(max(close_timeout, batches * 0.05)):
            for i in range(batches):
                for s in sources:
                    batch = plans[s][i]
                    await sink.handle(batch)
                    sent.extend((s, batch.first_seq + j) for j in range(len(batch.events)))
                if i % 16 == 0:
                    await trio.lowlevel.checkpoint()  # let the heartbeat run, as a real pump would
            # Give the heartbeat a tick to measure the last stretch of work.
            await trio.sleep(beat.interval * 2)
        await _close_twice(sink, close_timeout)
        await trio.sleep(beat.interval * 2)
        nursery.cancel_scope.cancel()
    assert max_block is None or beat.max_gap <= max_block, (
        f"the sink held the trio thread for {beat.max_gap * 1000:.0f} ms at once (bound "
        f"{(max_block or 0) * 1000:.0f} ms): move blocking work off the trio thread"
    )
    assert math.isfinite(beat.max_gap)
    if observe is not None:
        seen = list(await observe(sink))
        for s in sources:
            got = [x for x in seen if x[0] == s]
            want = [x for x in sent if x[0] == s]
            assert got == want, (
                f"source {s}: sink kept {len(got)} events, {len(want)} were sent, or their order differs"
            )

    # 3. Closing a sink that never handled anything is fine too.
    await _close_twice(await _make(factory), close_timeout)


async def _close_twice(sink: Sink, bound: float) -> None:
    for attempt in ("first", "second"):
        # Shielded from outer cancellation, as the runtime calls it, yet bounded.
        with trio.CancelScope(shield=True), trio.move_on_after(bound) as scope:
            await sink.aclose()
        assert not scope.cancelled_caught, f"{attempt} aclose() did not return within {bound} s"
