"""The engine's one owner object (:class:`agentrt.lowlevel.ProcessOwner`): what it costs and what it is told.

Over real fixture processes: an idle conversation's objects against a bare
process's in the same run, an async ``on_spawn`` awaited before the first
read, an owner hook's error handed back in ``on_exit`` with its code, an
async launch check, and :meth:`HostedProcess.signal` reaching only the
engine's own child.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import open_conversation
from agentrt.dialect import Turn
from agentrt.errors import AgentrtError
from agentrt.events import Event
from agentrt.lowlevel import HOOK_FAILED, AgentProcess, ProcessSpec, open_process
from agentrt.testing._pids import our_children

from .test_conversation import ENV, PLUGINS, launch
from .test_engine import Host

# Per idle conversation, gc-tracked objects beyond those of a bare open_process child of the
# same agent, as measured on the tree before the engine (a mixin, no callbacks): 40.7.  With a
# bound method per engine callback it was 47.9; with one owner object it is about 38.
_TREE_BEFORE_ENGINE_GAP = 40.7

_INIT = '{"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"}'
_SPEAKS_FIRST = f"#!{sys.executable} -S\nprint({_INIT!r}, flush=True)\n"


async def _objects_per_child(open_one: Any, n: int = 20) -> float:
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(open_one())  # the first of its kind warms every cache
        gc.collect()
        before = len(gc.get_objects())
        for _ in range(n):
            await stack.enter_async_context(open_one())
        gc.collect()
        after = len(gc.get_objects())
    return (after - before) / n


async def test_an_idle_conversation_costs_no_more_objects_over_its_process_than_before_the_engine(
    tmp_path: Path,
) -> None:
    spec = launch(tmp_path)
    bare = ProcessSpec(argv=(spec.executable,), env=ENV)
    with trio.fail_after(120):  # hang guard only
        process = await _objects_per_child(lambda: open_process(bare))
        # The smaller of two counts: what else the run holds at a count (a child's reader task not
        # yet ended, on a loaded machine) only adds objects, while a real cost shows in both.
        conversation = min(
            [await _objects_per_child(lambda: open_conversation(spec, plugins=PLUGINS, parent_env=ENV)) for _ in "ab"]
        )
    assert process > 0
    assert conversation - process <= _TREE_BEFORE_ENGINE_GAP, (conversation, process)


async def test_an_async_on_spawn_is_awaited_before_anything_is_read(tmp_path: Path) -> None:
    script = tmp_path / "speaks-first"
    script.write_text(_SPEAKS_FIRST)
    script.chmod(0o755)
    order: list[str] = []

    class Owner(Host):
        async def on_spawn(self, process: AgentProcess) -> None:
            # Its line is written and it has exited before this returns: a read now would see it.
            await process.exited.wait()
            order.append("spawned")

        async def on_events(self, events: list[Event]) -> None:
            order.append("events")
            await super().on_events(events)

    host = Owner(ProcessSpec(argv=(str(script),), env=ENV))
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery)
        with trio.fail_after(30):  # hang guard: the agent exits by itself
            await engine.ensure()
            order.append("ensured")
            await engine.wait()
    assert order[:2] == ["spawned", "ensured"] and "events" in order
    assert host.events  # the line was read, after on_spawn


async def test_a_hook_that_raises_ends_its_process_and_reaches_on_exit_with_its_code() -> None:
    class Broken(Host):
        calls = 0

        async def on_events(self, events: list[Event]) -> None:
            self.calls += 1
            raise ValueError("the owner's store is gone")

    host = Broken()
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery)
        proc = await engine.ensure()
        assert engine.codec is not None
        await engine.send(engine.codec.encode_turn(Turn.text("hi")))
        with trio.fail_after(30):  # hang guard: the engine stops the process itself
            await engine.wait()
    [end] = host.ends
    assert end.process is proc and end.status.requested  # stopped by the engine, not exited by itself
    assert end.failure is not None and end.failure.code == HOOK_FAILED
    assert isinstance(end.failure.__cause__, ValueError) and "on_events" in (end.failure.detail or "")
    assert host.calls == 1  # no hook of that process after the one that raised, but on_exit
    assert proc.pid not in our_children()


async def test_an_async_launch_check_that_refuses_spawns_nothing() -> None:
    class Refusing(Host):
        async def launch(self, resume: str | None, codec: Any) -> ProcessSpec:
            await trio.to_thread.run_sync(lambda: None)  # the check may run in a thread
            raise AgentrtError("spawn_failed", "refused by the check")

    host = Refusing()
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery)
        with pytest.raises(AgentrtError) as info:
            await engine.ensure()
    assert info.value.code == "spawn_failed"
    assert engine.process is None and engine.spawned == 0 and host.spawns == []


async def test_signal_reaches_only_the_engines_own_child_and_is_a_no_op_once_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host = Host()
    # A bystander of ours in a group of its own: it must outlive the engine's signal.
    bystander = subprocess.Popen(
        [sys.executable, "-S", "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, start_new_session=True
    )
    try:
        async with trio.open_nursery() as nursery:
            engine = host.engine(nursery)
            engine.signal(signal.SIGTERM)  # nothing spawned yet: nothing to signal
            proc = await engine.ensure()
            engine.signal(signal.SIGTERM)
            with trio.fail_after(30):  # hang guard: SIGTERM ends the fixture agent
                status = await engine.wait()
            assert status is not None and status.signal == signal.SIGTERM and not status.requested
            assert bystander.poll() is None  # alive: only the engine's group got it
            sent: list[tuple[int, int]] = []
            monkeypatch.setattr(os, "killpg", lambda pid, sig: sent.append((pid, sig)))
            engine.signal(signal.SIGKILL)  # reaped: its pid may be someone else's by now
            assert sent == []
        assert proc.pid not in our_children()
    finally:
        bystander.kill()
        bystander.wait()
