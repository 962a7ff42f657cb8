"""A live conversation holds exactly four descriptors, as many as a bare trio child with the same pipes.

Three pipe ends (stdin, stdout, stderr) and one pidfd: the exit is watched on
the spawner's pidfd, not on a second one.  Counted in /proc/self/fd with the
children live, against ``trio.lowlevel.open_process`` in the same test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from agentrt import LaunchSpec, Plugins, open_conversation
from agentrt.testing import write_fixture_agent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd and pidfds")

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
PLUGINS = Plugins(autoload=True)


def fd_kinds() -> dict[int, str]:
    """Every open descriptor and what it is ("pipe", "anon_inode:[pidfd]", ...)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        out[int(name)] = "pipe" if target.startswith("pipe:") else target
    return out


def added(before: dict[int, str], after: dict[int, str]) -> list[str]:
    return sorted(kind for fd, kind in after.items() if before.get(fd) != kind)


async def test_a_live_conversation_holds_three_pipes_and_one_pidfd(tmp_path: Path) -> None:
    launch = LaunchSpec.from_env({}, executable=write_fixture_agent(tmp_path, "normal"), model="m-1")
    # Warm up: the spawner threads, trio's wakeup pipe and the like exist from now on.
    async with open_conversation(launch, plugins=PLUGINS, parent_env=ENV):
        pass
    before = fd_kinds()
    with trio.fail_after(30):
        async with open_conversation(launch, plugins=PLUGINS, parent_env=ENV):
            # Every background task has started (and opened whatever it opens).
            await trio.testing.wait_all_tasks_blocked()
            live = fd_kinds()
            bare = await trio.lowlevel.open_process(
                [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
            )
            try:
                await trio.testing.wait_all_tasks_blocked()
                both = fd_kinds()
            finally:
                assert bare.stdin is not None and bare.stdout is not None and bare.stderr is not None
                await bare.stdin.aclose()
                await bare.wait()
                await bare.stdout.aclose()
                await bare.stderr.aclose()
    ours = added(before, live)
    assert ours == ["anon_inode:[pidfd]", "pipe", "pipe", "pipe"]
    assert added(live, both) == ours  # trio's own child: the same four
    assert fd_kinds() == before  # and all four closed when the conversation ended
