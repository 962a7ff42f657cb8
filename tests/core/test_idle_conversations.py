"""Idle conversations hold no task of their own: the pump parks in the run's one watcher (Linux, real agents)."""

from __future__ import annotations

import contextvars
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import attrs
import pytest
import trio

from agentrt import open_conversation
from agentrt._os.child_watch import AVAILABLE
from agentrt._plugins import Plugins
from agentrt.events import ProcessExited, TextDelta, TurnCompleted
from agentrt.permissions import PermissionDecision, PermissionRequest, deny_all
from agentrt.testing import PidWatch

from .test_child_watcher import _tasks
from .test_conversation import Recorder, launch, script_agent

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="the shared watcher uses epoll (Linux)")

PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl"})
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


async def test_idle_conversations_hold_no_task_of_their_own(tmp_path: Path) -> None:
    spec = launch(tmp_path)  # the fixture agent: answers each turn, then waits for the next
    with trio.fail_after(120):  # hang guard only
        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(open_conversation(spec, plugins=PLUGINS, parent_env=ENV))
            assert isinstance(await first.ask("warm up"), TurnCompleted)  # the watcher and spawners run
            before = _tasks()
            convs = [
                await stack.enter_async_context(open_conversation(spec, plugins=PLUGINS, parent_env=ENV))
                for _ in range(10)
            ]
            assert _tasks() == before  # live, never spoken to
            for round_ in range(2):  # a turn wakes the pump; once it has ended, the pump parks again
                for conv in convs:
                    events = [ev async for ev in conv.send(f"turn {round_}")]
                    assert isinstance(events[-1], TurnCompleted)
                    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta))
                assert _tasks() == before
            assert all(c.process is not None and not c.process.exited.is_set() for c in convs)
    assert all(c.exit_status is not None and c.exit_status.kind == "requested" for c in convs)


async def test_output_of_an_idle_conversation_wakes_its_pump(tmp_path: Path) -> None:
    # Output before any input (the agent's own init line) arrives while the pump is parked.
    rec = Recorder()
    async with open_conversation(launch(tmp_path, "output-before-input"), plugins=PLUGINS, sinks=[rec],
                                 parent_env=ENV) as conv:
        await rec.wait_for(lambda ev: getattr(ev, "code", None) == "output_before_input", timeout=30)
        assert isinstance(await conv.ask("hi"), TurnCompleted)


IDLE_EXIT_AGENT = """
import os, subprocess
for n, msg in enumerate(lines()):
    emit({"type": "system", "subtype": "init", "session_id": "s-idle", "model": "m-1"})
    helper = None
    if n == 0:
        # A helper that inherits stdout (as an MCP server would) and outlives the agent; named in the answer.
        helper = subprocess.Popen([sys.executable, "-S", "-c", "import time\\nwhile True: time.sleep(3600)"])
    text = str(helper.pid) if helper else "ok"
    emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
    emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-idle"})
    if n == 0:
        os._exit(0)  # after the turn, while the conversation is idle
"""


async def test_an_idle_agent_that_exits_while_a_grandchild_holds_stdout_is_seen_and_respawned(
    tmp_path: Path,
) -> None:
    # No task waits on the exit: the watcher's timer ends the output after the grace,
    # which wakes the parked pump; the next turn starts a new process.
    rec = Recorder()
    spec = script_agent(tmp_path, IDLE_EXIT_AGENT)
    helpers: list[PidWatch] = []  # each process's first turn starts one

    async def ask_for_helper() -> None:
        events = [ev async for ev in conv.send("go")]
        assert isinstance(events[-1], TurnCompleted)
        # Opened before the grace after the agent's exit can have ended: the pid is surely the helper's.
        helpers.append(PidWatch(int("".join(ev.text for ev in events if isinstance(ev, TextDelta)))))

    try:
        with trio.fail_after(60):  # hang guard only
            async with open_conversation(spec, plugins=PLUGINS, sinks=[rec], parent_env=ENV) as conv:
                await ask_for_helper()
                first = conv.process
                exited = await rec.wait_for(lambda ev: isinstance(ev, ProcessExited), timeout=30)
                assert isinstance(exited, ProcessExited) and not exited.requested
                # Its group was killed once the grace had ended the output: before the next turn.
                assert helpers[0].gone(30), "the helper holding the idle agent's stdout survived its exit"
                await ask_for_helper()
                assert conv.process is not first
                # The second agent exits idle too; the conversation closes within its grace.
                second = conv.process
                assert second is not None
                await second.exited.wait()
        assert helpers[1].gone(30), "the second agent's helper survived the conversation's close"
    finally:
        for helper in helpers:
            helper.close()  # killed here if it survived


async def test_an_ended_output_waits_for_the_exit_in_the_watcher_not_a_task() -> None:
    from agentrt._process import ProcessSpec, open_process

    # Closes its stdout at once, then lives until its stdin closes.
    code = "import os, sys; os.close(1); sys.stdin.read()"
    spec = ProcessSpec(argv=(sys.executable, "-S", "-c", code), env=ENV)
    woken: list[bool] = []
    with trio.fail_after(30):  # hang guard only
        async with open_process(spec) as proc:
            assert await proc.receive_some() == b""
            before = _tasks()
            assert proc.call_on_exit(lambda: woken.append(proc.exited.is_set()))
            assert not proc.call_on_exit(lambda: None)  # one waiter at a time
            assert _tasks() == before
            await proc.stop()
    assert woken == [True]
    assert not proc.call_on_exit(lambda: None)  # already exited



_OPENER: contextvars.ContextVar[str] = contextvars.ContextVar("opener", default="unset")

CONTROL_AGENT = """
for msg in lines():
    if msg.get("type") != "user":
        continue
    emit({"type": "system", "subtype": "init", "session_id": "s-ctl", "model": "m-1"})
    emit({"type": "control_request", "request_id": "r1",
          "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "ls"}}})
    for answer in lines():
        if answer.get("type") == "control_response":
            break
    emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-ctl"})
"""


async def test_a_woken_pump_sees_the_context_of_whoever_opened_the_conversation(tmp_path: Path) -> None:
    # The pump's task is started by the watcher: it must not run in the watcher's context.
    seen: list[str] = []

    async def policy(request: PermissionRequest) -> PermissionDecision:
        seen.append(_OPENER.get())
        return await deny_all(request)

    _OPENER.set("the opener")
    spec = attrs.evolve(script_agent(tmp_path, CONTROL_AGENT), protocol="stream-json")
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "stream-json"})
    with trio.fail_after(60):  # hang guard only
        async with open_conversation(spec, plugins=plugins, parent_env=ENV, permission_policy=policy) as conv:
            assert isinstance(await conv.ask("hi"), TurnCompleted)
    assert seen == ["the opener"]
