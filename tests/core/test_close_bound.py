"""Leaving ``open_conversation`` ends by one deadline (``CLOSE_TIMEOUT``), whatever the agent and the sinks do.

The agent here answers one turn, then ignores its shutdown line, the end of
its stdin and SIGTERM; two sinks never return from ``handle`` nor from
``aclose``.  The close still completes, each sink's ``handle`` and ``aclose``
are cancelled, and the deadline every ``aclose`` ran under is at most
``CLOSE_TIMEOUT`` after the close began (read from trio's effective deadline,
not measured on a clock).
"""

from __future__ import annotations

import math
import os
import pathlib
import sys
from typing import Literal

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import EventBatch, TurnCompleted
from agentrt.lowlevel import CLOSE_TIMEOUT

_SLACK = 1.0
ECHO_AGENT = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / "echo_agent.py"


class StuckSink:
    """A sink whose ``handle`` and ``aclose`` never return; it notes when each is cancelled."""

    policy: Literal["block"] = "block"
    buffer_size = 4

    def __init__(self, name: str) -> None:
        self.name = name
        self.handling = trio.Event()
        self.handle_cancelled = trio.Event()
        self.aclose_cancelled = trio.Event()
        self.aclose_deadline = math.nan

    async def handle(self, batch: EventBatch) -> None:
        self.handling.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.handle_cancelled.set()
            raise

    async def aclose(self) -> None:
        self.aclose_deadline = trio.current_effective_deadline()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.aclose_cancelled.set()
            raise


def _stubborn_agent(tmp_path: pathlib.Path) -> str:
    # The echo agent, ignoring SIGTERM, and living on after its shutdown line and the end of its stdin.
    path = tmp_path / "stubborn-agent"
    path.write_text(
        f"#!{sys.executable}\n"
        "import runpy, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "try:\n"
        f"    runpy.run_path({str(ECHO_AGENT)!r}, run_name='__main__')\n"
        "finally:\n"
        "    while True:\n"
        "        time.sleep(3600)\n"
    )
    path.chmod(0o755)
    return str(path)


async def test_leaving_a_conversation_ends_by_one_deadline_with_stuck_sinks_and_a_stubborn_agent(
    tmp_path: pathlib.Path,
) -> None:
    sinks = [StuckSink("stuck-a"), StuckSink("stuck-b")]
    launch = LaunchSpec(executable=_stubborn_agent(tmp_path), protocol="awp-jsonl")
    env = {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin"}
    with trio.fail_after(120):  # a hang guard only
        async with open_conversation(launch, sinks=sinks, parent_env=env) as conv:
            reply = await conv.ask("hello there")
            assert isinstance(reply, TurnCompleted)
            for sink in sinks:
                await sink.handling.wait()
            assert conv.process is not None
            pid = conv.process.pid
            began = trio.current_time()
    for sink in sinks:
        assert sink.handle_cancelled.is_set(), sink.name
        assert sink.aclose_cancelled.is_set(), sink.name  # both closed side by side, both cut off
        # The close takes its deadline as it begins, right after `began` (no wait between: the slack is
        # for that step under load); the old per-wait bounds gave one more than 13 s later.
        assert began < sink.aclose_deadline <= began + CLOSE_TIMEOUT + _SLACK, sink.name
    assert not os.path.exists(f"/proc/{pid}")  # the agent that ignored SIGTERM was killed and reaped
