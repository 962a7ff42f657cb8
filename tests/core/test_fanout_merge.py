"""merge_batches: what a lagging coalescing sink gets, built in one pass (each run of deltas joined once)."""

from __future__ import annotations

import random
from typing import Any

import pytest

import agentrt._fanout as fanout
from agentrt.events import Event, EventBatch, Status, TextDelta


def _batch(events: list[Event]) -> EventBatch:
    return EventBatch(source="s", first_seq=0, mono=0.0, wall=0.0, events=tuple(events))


def _expected(batches: list[EventBatch]) -> list[Event]:
    """Adjacent deltas of one block concatenated, everything else in order (written plainly)."""
    out: list[Event] = []
    for batch in batches:
        for ev in batch.events:
            prev = out[-1] if out else None
            if type(ev) is TextDelta and type(prev) is TextDelta and prev.index == ev.index:
                out[-1] = TextDelta(text=prev.text + ev.text, index=ev.index)
            else:
                out.append(ev)
    return out


def test_merge_keeps_order_and_joins_runs_of_one_block() -> None:
    rng = random.Random(7)
    for _ in range(300):
        batches = [_batch([TextDelta(text=str(rng.random())[: rng.randint(0, 5)], index=rng.randint(0, 1))
                           if rng.random() < 0.7 else Status(kind="k") for _ in range(rng.randint(0, 6))])
                   for _ in range(rng.randint(1, 6))]
        assert list(fanout.merge_batches(batches).events) == _expected(batches)


def test_a_long_run_is_joined_once_not_copied_per_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    # Adding each delta to the run so far copied the whole text per delta: quadratic in the lag of a sink.
    batches = [_batch([TextDelta(text="x" * 8) for _ in range(100)]) for _ in range(50)]
    made: list[int] = []
    init = TextDelta.__init__

    def counting(self: TextDelta, **kw: Any) -> None:
        made.append(len(kw["text"]))
        init(self, **kw)

    monkeypatch.setattr(TextDelta, "__init__", counting)
    [merged] = fanout.merge_batches(batches).events
    assert isinstance(merged, TextDelta) and merged.text == "x" * 8 * 5000
    assert made == [40_000]  # one delta made, the text copied once
