"""Many open_process/stop cycles leak neither file descriptors nor zombie children."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
import trio

from agentrt._os.spawn_client import _SERVE_AFTER
from agentrt._process import ProcessSpec, open_process
from agentrt.testing import fixture_agent_argv
from agentrt.testing._pids import our_children

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
USER_LINE = b'{"type":"user","message":{"role":"user","content":"hi"}}\n'


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def zombie_children() -> list[int]:
    """Pids of our children in state Z (exited but never waited for)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after ")".
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] == b"Z" and int(fields[1]) == me:
            found.append(int(entry))
    return found


def assert_no_children_left() -> None:
    assert zombie_children() == []
    assert our_children() == []  # alive or zombie; the spawn servers stay


def true_spec() -> ProcessSpec:
    exe = shutil.which("true")
    assert exe is not None
    return ProcessSpec(argv=(os.path.realpath(exe),), env=ENV)


async def cycles(spec: ProcessSpec, count: int, *, converse: bool) -> None:
    for _ in range(count):
        with trio.fail_after(10):
            async with open_process(spec) as proc:
                if converse:
                    await proc.send(USER_LINE)
                    data = b""
                    while b'"result"' not in data:
                        chunk = await proc.receive_some()
                        assert chunk, "EOF before the result"
                        data += chunk
                else:
                    await proc.wait()
            assert proc.exit_status is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_1000_cycles_leak_no_fds_and_no_zombies() -> None:
    spec = true_spec()
    await cycles(spec, 20, converse=False)  # warm up trio's thread cache and the like
    before = open_fds()
    await cycles(spec, 1000, converse=False)
    assert open_fds() == before
    assert_no_children_left()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_100_conversing_cycles_with_stop_leak_nothing() -> None:
    # Each cycle: a full turn with the fixture agent, then a requested stop.
    spec = ProcessSpec(argv=fixture_agent_argv("normal"), env=ENV)
    # Past the spawn count at which this run starts its spawn servers (they live until the run ends).
    await cycles(spec, _SERVE_AFTER + 2, converse=True)
    before = open_fds()
    await cycles(spec, 100, converse=True)
    assert open_fds() == before
    assert_no_children_left()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_killed_children_leak_nothing() -> None:
    spec = ProcessSpec(argv=fixture_agent_argv("hang"), env=ENV, shutdown_grace=0.01, term_grace=0.01)
    # The run's child watcher and the spawn servers: one each, not one per child.  The servers
    # belong to this trio run and start after its first few spawns, so warm up past that count.
    await cycles(true_spec(), _SERVE_AFTER + 2, converse=False)
    before = open_fds()
    for _ in range(20):
        with trio.fail_after(10):
            async with open_process(spec) as proc:
                pass
        assert proc.exit_status is not None and proc.exit_status.kind == "requested"
    assert open_fds() == before
    assert_no_children_left()
