"""One watcher per run sees every child's exit and stderr: no task per child (Linux, real children)."""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack

import pytest
import trio

from agentrt._os.child_watch import AVAILABLE, ChildWatcher, current_watcher
from agentrt._process import ProcessSpec, open_process

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="the shared watcher uses epoll (Linux)")

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _tasks() -> int:
    """Every task of this run (system tasks included)."""
    count = 0
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        count += 1
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return count


async def test_idle_children_hold_no_task_of_their_own() -> None:
    # Reads stdin to its end: idle until stopped.
    spec = ProcessSpec(argv=(sys.executable, "-S", "-c", "import sys; sys.stdin.read()"), env=ENV)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(open_process(spec))  # the watcher starts with the first child
        before = _tasks()
        procs = [await stack.enter_async_context(open_process(spec)) for _ in range(10)]
        assert _tasks() == before
        assert not any(p.exited.is_set() for p in procs)
    assert all(p.exit_status is not None and p.exit_status.kind == "requested" for p in procs)


async def test_exit_and_stderr_of_many_children_arrive_through_the_one_watcher() -> None:
    code = "import sys; sys.stderr.write('x' * 70000 + 'end'); sys.exit(3)"
    spec = ProcessSpec(argv=(sys.executable, "-S", "-c", code), env=ENV, stdin=False)

    async def one(results: list[tuple[int | None, bytes]]) -> None:
        async with open_process(spec) as proc:
            with trio.fail_after(30):
                status = await proc.wait()
                await proc.wait_stderr_closed()
            results.append((status.returncode, proc.stderr_tail(3)))

    results: list[tuple[int | None, bytes]] = []
    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(one, results)
    assert results == [(3, b"end")] * 20


async def test_a_failing_callback_leaves_the_watcher_serving_the_others() -> None:
    watcher = current_watcher()
    assert isinstance(watcher, ChildWatcher)
    bad_r, bad_w = os.pipe()
    good_r, good_w = os.pipe()
    seen = trio.Event()

    def fail() -> None:
        raise RuntimeError("boom")

    def good() -> None:
        os.read(good_r, 16)
        watcher.remove(good_r)
        seen.set()

    try:
        watcher.add(bad_r, fail)
        watcher.add(good_r, good)
        os.write(bad_w, b"!")
        os.write(good_w, b"!")
        with trio.fail_after(30):
            await seen.wait()
    finally:
        watcher.remove(bad_r)
        watcher.remove(good_r)
        for fd in (bad_r, bad_w, good_r, good_w):
            os.close(fd)


async def test_a_reaped_childs_descriptor_number_reused_by_the_next_child_stays_watched() -> None:
    # The reap closes a child's pidfd before its context ends; the number may
    # come back at once as another child's.  Leaving the first context must not
    # unregister the second child: every exit below must be seen as such.
    spec = ProcessSpec(argv=(sys.executable, "-S", "-c", "pass"), env=ENV, stdin=False)
    kinds: list[str] = []

    async def one() -> None:
        async with open_process(spec) as proc:
            with trio.fail_after(30):
                await proc.wait()
            assert proc._events.pidfd == -1  # let go at the exit, before the reap closes it
        assert proc.exit_status is not None
        kinds.append(proc.exit_status.kind)

    async with trio.open_nursery() as nursery:
        for _ in range(40):
            nursery.start_soon(one)
    assert kinds == ["exited"] * 40
