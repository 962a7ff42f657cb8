"""Soak: many conversations against scripted agents that misbehave at random, in bounded parallelism.

Not part of the default run (``soak`` marker; ``nox -s soak``). ``AGENTRT_SOAK_N`` conversations
(default 10,000), ``AGENTRT_SOAK_PARALLEL`` at a time (default 8), each of one to three turns, every
turn bounded (a hanging agent is cancelled; a turn that still does not end is a hang). Proves zero
hangs, zero turn-rule violations, zero leaked file descriptors and zero surviving processes (every
pid the agents and their grandchildren reported, checked after each conversation and at the end),
and prints a summary.
"""

from __future__ import annotations

import collections
import os
import random
import resource
import time
from pathlib import Path

import pytest
import trio

from agentrt import open_conversation
from agentrt._os import child_watch as _watch
from agentrt.events import Diagnostic, TurnCompleted

from ._harness import (
    ENV,
    PLUGINS,
    TERM_GRACE,
    Recorder,
    baseline_fds,
    check_outcome,
    kill_survivors,
    marked_processes,
    open_fds,
    recorded_pids,
    run_turn,
    scripted_launch,
    wait_gone,
)

# What each kind of misbehaving agent does in a turn.
BEHAVIOURS: dict[str, list[str]] = {
    "clean": ["delta", "delta", "terminal"],
    "flood": ["flood", "terminal"],
    "hang": ["delta", "hang"],
    "hang-hard": ["delta", "hang-hard"],
    "grandchild": ["grandchild", "delta", "exit:0"],
    "exit-mid-turn": ["delta", "exit:3"],
    "killed": ["delta", "signal:9"],
    "surrogates": ["surrogate", "delta", "surrogate", "terminal"],
    "garbage": ["garbage", "delta", "garbage", "fail"],
    "oversize": ["delta", "oversize"],
    # Output after the terminal, then a sync line the soak waits for before the next turn: late output
    # that crossed the next turn's input could not be told from that turn's own, in any protocol.
    "late-output": ["delta", "terminal", "late", "sync"],
}


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.strip() else default


@pytest.mark.soak
async def test_soak_misbehaving_agents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    total = _env_int("AGENTRT_SOAK_N", 10_000)
    parallel = max(1, _env_int("AGENTRT_SOAK_PARALLEL", 8))
    seed = _env_int("AGENTRT_SOAK_SEED", random.randrange(1 << 30))
    rng = random.Random(seed)
    outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
    violations: list[str] = []
    hangs: list[str] = []
    survivors: list[int] = []
    all_pids: set[tuple[int, int]] = set()
    sink_failures = 0
    fds_before = baseline_fds()
    limiter = trio.CapacityLimiter(parallel)
    started = time.monotonic()

    async def one(n: int, behaviours: list[str]) -> None:
        nonlocal sink_failures
        async with limiter:
            launch, pids = scripted_launch(tmp_path / f"c{n}")
            rec = Recorder()
            try:
                async with open_conversation(
                    launch, plugins=PLUGINS, sinks=[rec], parent_env=ENV, term_grace=TERM_GRACE
                ) as conv:
                    for k, behaviour in enumerate(behaviours):
                        script = [f"sync:{k}" if a == "sync" else a for a in BEHAVIOURS[behaviour]]
                        try:
                            outcome = await run_turn(conv, script)
                            if "late" in script:
                                await rec.wait_sync(k)
                        except trio.TooSlowError:
                            hangs.append(f"conversation {n}: {behaviour}")
                            return
                        except AssertionError as exc:
                            violations.append(f"conversation {n}: {behaviour}: {exc}")
                            continue
                        terminal = outcome.terminal
                        outcomes[behaviour, "completed" if isinstance(terminal, TurnCompleted) else terminal.code] += 1
                        try:
                            check_outcome(script, outcome)
                        except AssertionError as exc:
                            violations.append(f"conversation {n} {behaviours}: {exc}")
            finally:
                sink_failures += sum(1 for ev in rec.events if type(ev) is Diagnostic and ev.code == "sink_failed")
                reported = recorded_pids(pids)
                all_pids.update(reported)
                left = await wait_gone(reported)
                survivors.extend(left)
                kill_survivors(left)
                for path in pids.parent.iterdir():
                    path.unlink()
                pids.parent.rmdir()

    names = sorted(BEHAVIOURS)
    async with trio.open_nursery() as nursery:
        for n in range(total):
            nursery.start_soon(one, n, [rng.choice(names) for _ in range(rng.randint(1, 3))])
    wall = time.monotonic() - started
    late_left = await wait_gone(all_pids)
    stray = marked_processes(str(tmp_path))
    kill_survivors(late_left + stray)
    fds_after = open_fds()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss

    lines = [
        f"soak: {total} conversations, {sum(outcomes.values())} turns, {parallel} at a time, seed {seed}",
        f"soak: wall time {wall:.1f} s, max RSS {own / 1024:.1f} MiB (largest child {children / 1024:.1f} MiB)",
        f"soak: fds before {fds_before}, after {fds_after}; processes reported {len(all_pids)}, "
        f"surviving {len(survivors) + len(late_left)} (+{len(stray)} by command line)",
        f"soak: hangs {len(hangs)}, turn-rule violations {len(violations)}, sink failures {sink_failures}",
    ]
    for behaviour in names:
        got = {code: count for (b, code), count in sorted(outcomes.items()) if b == behaviour}
        lines.append(f"soak:   {behaviour:<14} {got}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))

    assert not hangs, hangs[:5]
    assert not violations, violations[:5]
    assert not survivors and not late_left and not stray, (survivors[:5], late_left[:5], stray[:5])
    assert fds_after == fds_before
    assert sink_failures == 0


def test_behaviours_cover_the_issue() -> None:
    """The soak's agents misbehave in every way the issue names."""
    scripts = {action.partition(":")[0] for script in BEHAVIOURS.values() for action in script}
    assert {"flood", "hang", "grandchild", "exit", "surrogate"} <= scripts


async def test_the_descriptor_count_leaves_out_the_watcher_and_still_sees_a_leak() -> None:
    """The run's child watcher (one epoll, started at the first spawn) is not a leak; anything else is."""
    before = open_fds()
    _watch.current_watcher()  # what the run's first spawn starts; it lives until the run ends
    assert open_fds() == before
    read_end, write_end = os.pipe()
    try:
        assert open_fds() == before + 2
    finally:
        os.close(read_end)
        os.close(write_end)
    assert open_fds() == before
