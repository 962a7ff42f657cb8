"""Fault injection, stateful: random interleavings of agent output, exits, signals, grandchildren,
hangs, cancels, sends and stops against the scripted fixture agent, through the public Conversation
API. Every turn gets exactly one terminal event, the one its script earns (or ``turn_cancelled``);
nothing from after a terminal reaches a turn; no step hangs; and once the conversation is closed no
process the agents started is running and the file descriptor count is back where it started.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from agentrt import open_conversation
from agentrt.events import Diagnostic, TurnFailed

from ._harness import (
    ENV,
    EXIT_CODES,
    PLUGINS,
    SIGNALS,
    STEP_GUARD,
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

T = TypeVar("T")

# Weighted by repetition. A grandchild holding stdout makes the agent's exit wait out the runtime's
# exit grace (2 s): rarer than the rest, so the suite stays well under a minute.
NOISE = st.sampled_from(["delta"] * 4 + ["surrogate"] * 2 + ["garbage"] * 2 + ["grandchild"])
ENDING = st.one_of(
    st.sampled_from([["terminal"]] * 4 + [["fail"]] * 2 + [["oversize"], ["hang"], ["hang-hard"]]),
    st.sampled_from(EXIT_CODES).map(lambda n: [f"exit:{n}"]),
    st.sampled_from(SIGNALS).map(lambda s: [f"signal:{int(s)}"]),
    st.sampled_from([["grandchild", "exit:0"], ["terminal"], ["terminal"], ["fail"]]),
)
SCRIPTS = st.tuples(st.lists(NOISE, max_size=4), ENDING).map(lambda parts: parts[0] + parts[1])


class TrioThread:
    """A trio loop in a thread, so hypothesis's synchronous rules can drive one open conversation."""

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._done = trio.Event()
        started = threading.Event()

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                started.set()
                await self._done.wait()
                nursery.cancel_scope.cancel()

        self._thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
        self._thread.start()
        assert started.wait(STEP_GUARD), "the trio thread did not start"

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` in the loop and return its result."""
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def start(self, fn: Callable[..., Awaitable[Any]]) -> Any:
        """``nursery.start(fn)`` in the loop's own nursery (bounded): the task outlives this call."""

        async def start() -> Any:
            assert self._nursery is not None
            with trio.fail_after(STEP_GUARD):
                return await self._nursery.start(fn)

        return self.run(start)

    def close(self) -> None:
        trio.from_thread.run_sync(self._done.set, trio_token=self._token)
        self._thread.join(STEP_GUARD)
        assert not self._thread.is_alive(), "the trio thread did not end"


class TurnRules(RuleBasedStateMachine):
    """One conversation with a scripted agent per example."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.fds_before = baseline_fds()
        self.dir = root / f"run-{len(list(root.iterdir()))}"
        self.launch, self.pids = scripted_launch(self.dir)
        self.rec = Recorder()
        self.stopped = False
        self.syncs = 0
        self.close_requested = trio.Event()
        self.closed = trio.Event()
        self.trio = TrioThread()
        self.conv: Any = self.trio.start(self._host)

    async def _host(self, task_status: Any) -> None:
        try:
            async with open_conversation(
                self.launch, plugins=PLUGINS, sinks=[self.rec], parent_env=ENV, term_grace=TERM_GRACE
            ) as conv:
                task_status.started(conv)
                await self.close_requested.wait()
        finally:
            self.closed.set()

    async def _close_conv(self) -> None:
        self.close_requested.set()
        with trio.fail_after(STEP_GUARD):
            await self.closed.wait()

    # -- rules -------------------------------------------------------------------
    @rule(script=SCRIPTS, late=st.booleans())
    def send_a_turn(self, script: list[str], late: bool) -> None:
        """A turn runs its script; after a terminal the agent may go on talking (late output)."""
        if late and script[-1] in ("terminal", "fail"):
            self.syncs += 1
            script = [*script, "late", f"sync:{self.syncs}"]
        outcome = self.trio.run(run_turn, self.conv, script)
        if self.stopped:
            assert isinstance(outcome.terminal, TurnFailed) and outcome.terminal.code == "session_exited"
            return
        check_outcome(script, outcome)
        if script[-1].startswith("sync:"):
            self.trio.run(self.rec.wait_sync, self.syncs)  # the late output has gone by before the next turn

    @rule(script=SCRIPTS)
    def cancel_a_turn_at_once(self, script: list[str]) -> None:
        """``cancel_turn`` right after the turn went out: the script's own end or ``turn_cancelled``."""
        outcome = self.trio.run(lambda conv, s: run_turn(conv, s, cancel_early=True), self.conv, script)
        if not self.stopped:
            check_outcome(script, outcome)

    @rule()
    def cancel_between_turns(self) -> None:
        """With no turn in flight, ``cancel_turn`` does nothing."""
        self.trio.run(self.conv.cancel_turn)

    @precondition(lambda self: not self.stopped)
    @rule()
    def stop(self) -> None:
        """A stop is bounded and final: later turns fail with ``session_exited``."""

        async def stop(conv: Any) -> None:
            with trio.fail_after(STEP_GUARD):
                await conv.stop()

        self.trio.run(stop, self.conv)
        self.stopped = True

    @invariant()
    def no_sink_was_detached(self) -> None:
        failed = [ev for ev in self.rec.events if type(ev) is Diagnostic and ev.code == "sink_failed"]
        assert not failed, failed

    def teardown(self) -> None:
        try:
            self.trio.run(self._close_conv)
            pids = recorded_pids(self.pids)
            left = self.trio.run(wait_gone, pids)
            stray = marked_processes(str(self.pids))
        finally:
            self.trio.close()
        kill_survivors(left + stray)
        assert not left, f"agent processes still running after close: {left}"
        assert not stray, f"processes naming this run still running after close: {stray}"
        assert open_fds() == self.fds_before, f"fd count {open_fds()} after close, {self.fds_before} before"


def test_turn_rules_hold_under_injected_faults(tmp_path: Path) -> None:
    run_state_machine_as_test(
        lambda: TurnRules(tmp_path),
        settings=settings(
            max_examples=20,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
            # No shrinking: a hang costs a whole guard per attempt, and the scripts are short already.
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
        ),
    )
