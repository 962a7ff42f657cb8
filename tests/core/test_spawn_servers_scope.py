"""Nothing agentrt starts outlives the trio run that started it, spawn servers included.

Each case is a real program (a subprocess) that opens 12 conversations with the
example echo agent inside one ``trio.run`` (from the ninth spawn on, children
go through the two spawn servers), then lists its own children, and every
process whose parent it is (a zombie included), once the run has returned.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from agentrt.lowlevel import DEATH_SIGNAL_SUPPORTED

pytestmark = pytest.mark.skipif(
    not DEATH_SIGNAL_SUPPORTED, reason="spawn servers run on Linux only (clone with CLONE_PARENT)"
)

ECHO_AGENT = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / "echo_agent.py"
CONVERSATIONS = 12

PROGRAM = textwrap.dedent(
    """
    import json, os, sys, trio
    from agentrt import LaunchSpec, open_conversation
    from agentrt.lowlevel import keep_spawn_servers, stop_spawn_servers

    AGENT, MODE, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ENV = {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin"}
    ME = os.getpid()

    def children():
        # Every thread's children (the first few agents are forked by spawner threads).
        found = []
        for tid in os.listdir(f"/proc/{ME}/task"):
            with open(f"/proc/{ME}/task/{tid}/children") as f:
                found += [int(pid) for pid in f.read().split()]
        return sorted(found)

    def parented():
        # Any process whose parent we are, with its state (Z: a zombie nobody reaped).
        found = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == ME:
                    found[entry] = fields[0]
        return found

    async def run_once(end):
        launch = LaunchSpec(executable=AGENT, protocol="awp-jsonl")
        live = []
        all_live = trio.Event()

        async def one():
            async with open_conversation(launch, parent_env=ENV) as conv:
                reply = await conv.ask("hello there")
                assert type(reply).__name__ == "TurnCompleted", reply
                live.append(conv)
                if len(live) == N:
                    all_live.set()
                await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            for _ in range(N):
                nursery.start_soon(one)
            await all_live.wait()
            during = len(children())
            if end == "raise":
                print(json.dumps({"during": during}), flush=True)
                raise RuntimeError("the program failed")
            nursery.cancel_scope.cancel()
        return during

    def report(label, during=None):
        print(json.dumps({"label": label, "during": during, "children": children(), "parented": parented()}),
              flush=True)

    if MODE == "normal":
        report("after", trio.run(run_once, "cancel"))
    elif MODE == "twice":
        report("after-first", trio.run(run_once, "cancel"))
        report("after-second", trio.run(run_once, "cancel"))
    elif MODE == "raise":
        try:
            trio.run(run_once, "raise")
        except BaseExceptionGroup as group:  # the nursery's group around the program's own error
            assert group.subgroup(RuntimeError) is not None
            report("after")
    elif MODE == "warm":
        keep_spawn_servers()
        report("after-first", trio.run(run_once, "cancel"))
        report("after-second", trio.run(run_once, "cancel"))
        stop_spawn_servers()
        report("after-stop")
    """
)


def _run(mode: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(ECHO_AGENT), mode, str(CONVERSATIONS)],
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def _assert_nothing_left(record: dict[str, object]) -> None:
    assert record["children"] == [], record
    assert record["parented"] == {}, record  # no zombie either (a zombie keeps its parent)


def test_no_child_is_left_once_trio_run_returns() -> None:
    (after,) = _run("normal")
    # While the run held them: the 12 agents and the two spawn servers.
    assert after["during"] == CONVERSATIONS + 2
    _assert_nothing_left(after)


def test_a_second_run_in_the_same_process_starts_its_own_servers_and_leaves_nothing() -> None:
    first, second = _run("twice")
    assert first["during"] == second["during"] == CONVERSATIONS + 2
    _assert_nothing_left(first)
    _assert_nothing_left(second)


def test_a_run_that_ends_by_an_exception_leaves_nothing() -> None:
    during, after = _run("raise")
    assert during["during"] == CONVERSATIONS + 2
    _assert_nothing_left(after)


def test_kept_warm_the_servers_outlive_the_run_until_stopped() -> None:
    first, second, stopped = _run("warm")
    assert first["during"] == CONVERSATIONS + 2
    assert len(first["children"]) == 2  # type: ignore[arg-type]  # the two servers, kept
    assert second["children"] == first["children"]  # the same two, reused by the second run
    assert all(state != "Z" for state in first["parented"].values())  # type: ignore[attr-defined]
    _assert_nothing_left(stopped)

