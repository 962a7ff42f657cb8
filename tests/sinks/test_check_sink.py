"""The conformance suite itself must catch broken sinks."""

import time
from collections.abc import Sequence

import pytest
import trio

from agentrt.events import EventBatch
from agentrt.sinks import Sink
from agentrt.testing import check_sink


class _Good:
    name = "memory"
    policy = "block"
    buffer_size = 8

    def __init__(self) -> None:
        self.kept: list[tuple[str, int]] = []
        self.closed = 0

    async def handle(self, batch: EventBatch) -> None:
        self.kept.extend((batch.source, batch.first_seq + i) for i in range(len(batch.events)))

    async def aclose(self) -> None:
        self.closed += 1


async def _observe(sink: Sink) -> Sequence[tuple[str, int]]:
    assert isinstance(sink, _Good)
    return sink.kept


async def test_a_correct_sink_passes() -> None:
    await check_sink(_Good, observe=_observe)


class _Blocking(_Good):
    async def handle(self, batch: EventBatch) -> None:
        if batch.source == "conformance-a" and batch.first_seq == 0:
            time.sleep(0.3)  # the bug under test: blocking the trio thread
        await super().handle(batch)


class _Lossy(_Good):
    async def handle(self, batch: EventBatch) -> None:
        if batch.first_seq % 3 != 1:
            await super().handle(batch)


class _BadPolicy(_Good):
    policy = "drop"


class _ZeroBuffer(_Good):
    buffer_size = 0


class _HangingClose(_Good):
    async def aclose(self) -> None:
        await trio.sleep_forever()


class _RejectsUnknown(_Good):
    async def handle(self, batch: EventBatch) -> None:
        for ev in batch.events:
            if ev.type == "x_third_party":
                raise KeyError(ev.type)
        await super().handle(batch)


@pytest.mark.parametrize(
    ("cls", "needle"),
    [
        (_Lossy, "events of every type"),
        (_BadPolicy, "policy"),
        (_ZeroBuffer, "buffer_size"),
        (_HangingClose, "aclose"),
    ],
)
async def test_broken_sinks_fail_with_a_clear_message(autojump_clock: trio.abc.Clock, cls: type, needle: str) -> None:
    # Virtual time: the hanging aclose() meets its bound at once, and no other step can outrun a
    # bound however loaded the machine is (these sinks do no I/O).
    with pytest.raises(AssertionError, match=needle):
        await check_sink(cls, observe=_observe, close_timeout=10)


async def test_a_sink_that_blocks_the_trio_thread_fails() -> None:
    # A lower bound on the measured stall: load only makes the gap longer, so this cannot flake.
    with pytest.raises(AssertionError, match="held the trio thread"):
        await check_sink(_Blocking, batches=2, max_block=0.25)


async def test_the_block_bound_is_off_by_default() -> None:
    # A wall-clock bound would fail correct sinks on a loaded machine: it is opt-in.
    await check_sink(_Blocking, batches=2)


async def test_a_sink_that_rejects_unknown_events_fails() -> None:
    with pytest.raises(KeyError):
        await check_sink(_RejectsUnknown)


async def test_async_factories_are_accepted() -> None:
    async def make() -> _Good:
        await trio.lowlevel.checkpoint()
        return _Good()

    await check_sink(make, observe=_observe)
