"""Conversations on the fallback paths: no shared ``epoll`` watcher, and (macOS-like) no pidfd or death signal.

On Linux every child is watched by the run's one ``epoll`` watcher
(:mod:`agentrt._os.child_watch`) and spawned with a pidfd and a death signal
(:mod:`agentrt._os.spawn`); elsewhere (macOS, the BSDs) each process gets an
exit task and a stderr task of its own and is spawned by trio's
``open_process``.  CI runs on Linux, so these tests force the fallback by
switching the platform flags off for one trio run, and prove it ran: no watcher
was created in the run, no spawn server was held, the child is trio's own
process object.  Each test runs twice:

``no-pidfd``
    what macOS has: neither the watcher nor pidfds (``DEATH_SIGNAL_SUPPORTED``
    false: trio's spawn, per-process tasks, ``Process.wait`` reaps).
``no-epoll``
    pidfds and the spawn servers but no shared watcher: per-process tasks that
    learn of the exit through the pidfd without reaping.

Real fixture agents, real pipes; each trio run (one per test under
pytest-trio) starts without a watcher, so patching the flags before the first
spawn is enough.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from agentrt import open_conversation
from agentrt._os import child_watch, spawn, spawn_client
from agentrt._os.spawn import _LinuxProcess
from agentrt.events import Diagnostic, ProcessExited, TextDelta, TurnCompleted, TurnFailed
from agentrt.lowlevel import AgentProcess
from agentrt.testing._pids import PidWatch, our_children

from .test_conversation import ENV, GRANDCHILD_AGENT, PLUGINS, Recorder, launch, script_agent


@attrs.frozen
class Fallback:
    """Which fallback a test runs on, and what it must see."""

    name: str
    pidfd: bool
    """Whether children are still spawned with a pidfd (the spawn servers' ``_LinuxProcess``)."""

    def check_process(self, proc: AgentProcess) -> None:
        """The conversation's child came from the expected spawn path, unwatched."""
        inner = proc._proc
        assert isinstance(inner, _LinuxProcess) is self.pidfd, type(inner)
        if not self.pidfd:
            assert isinstance(inner, trio.Process)
        assert proc._events.watcher is None


def _no_watcher() -> child_watch.ChildWatcher:
    raise AssertionError("the shared child watcher was asked for on a fallback path")


@pytest.fixture(params=["no-pidfd", "no-epoll"])
async def fallback(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Fallback]:
    """Force the fallback for this test's trio run; on teardown, prove it was the one that ran."""
    mode = Fallback(name=request.param, pidfd=request.param == "no-epoll")
    monkeypatch.setattr(child_watch, "AVAILABLE", False)
    monkeypatch.setattr(child_watch, "current_watcher", _no_watcher)
    if not mode.pidfd:
        monkeypatch.setattr(spawn, "DEATH_SIGNAL_SUPPORTED", False)
    with pytest.raises(LookupError):
        child_watch._current.get()  # this run starts without a watcher
    yield mode
    with pytest.raises(LookupError):
        child_watch._current.get()  # ... and none was created behind the patched accessor
    # The macOS-like path never reaches the spawn servers; the other holds them for the run.
    assert spawn_client._holding.get() is mode.pidfd


async def test_turns_complete_and_the_close_is_a_requested_exit(fallback: Fallback, tmp_path: Path) -> None:
    rec = Recorder()
    with trio.fail_after(60):  # hang guard only
        async with open_conversation(launch(tmp_path), plugins=PLUGINS, sinks=[rec], parent_env=ENV) as conv:
            for prompt in ("hello", "again"):
                events = [ev async for ev in conv.send(prompt)]
                assert isinstance(events[-1], TurnCompleted)
                assert sum(isinstance(ev, (TurnCompleted, TurnFailed)) for ev in events) == 1
                assert "".join(ev.text for ev in events if isinstance(ev, TextDelta))
            assert conv.process is not None
            fallback.check_process(conv.process)
    exited = rec.events[-1]
    assert isinstance(exited, ProcessExited) and exited.requested and exited.returncode == 0
    assert rec.seqs == list(range(len(rec.seqs)))


STDERR_EXIT_AGENT = """
for msg in lines():
    emit({"type": "system", "subtype": "init", "session_id": "s-err", "model": "m-1"})
    sys.stderr.write("warming up\\nfatal: the model said no\\n"); sys.stderr.flush()
    sys.exit(7)
"""


async def test_exit_before_result_names_the_code_and_the_stderr_tail(fallback: Fallback, tmp_path: Path) -> None:
    with trio.fail_after(60):  # hang guard only
        async with open_conversation(launch(tmp_path, "exit-mid-turn"), plugins=PLUGINS, parent_env=ENV) as conv:
            events = [ev async for ev in conv.send("hi")]
        terminal = events[-1]
        assert isinstance(terminal, TurnFailed) and terminal.code == "exit_before_result"
        assert "code=3" in terminal.message
        async with open_conversation(
            script_agent(tmp_path, STDERR_EXIT_AGENT), plugins=PLUGINS, parent_env=ENV
        ) as conv:
            terminal = await conv.ask("hi")
    assert isinstance(terminal, TurnFailed) and terminal.code == "exit_before_result"
    assert "code=7" in terminal.message
    assert terminal.message.endswith("warming up\n  fatal: the model said no"), terminal.message


async def test_output_while_idle_is_read_and_the_next_turn_goes_on(fallback: Fallback, tmp_path: Path) -> None:
    # No parking here: the process's own task reads the agent's line written before any prompt.
    rec = Recorder()
    with trio.fail_after(60):  # hang guard only
        async with open_conversation(
            launch(tmp_path, "output-before-input"), plugins=PLUGINS, sinks=[rec], parent_env=ENV
        ) as conv:
            diag = await rec.wait_for(lambda ev: getattr(ev, "code", None) == "output_before_input", timeout=30)
            assert isinstance(diag, Diagnostic)
            assert isinstance(await conv.ask("hi"), TurnCompleted)


IDLE_EXIT_AGENT = """
import os, subprocess
for n, msg in enumerate(lines()):
    emit({"type": "system", "subtype": "init", "session_id": "s-idle", "model": "m-1"})
    helper = None
    if n == 0:
        # A helper that inherits stdout (as an MCP server would) and outlives the agent.
        helper = subprocess.Popen([sys.executable, "-S", "-c", "import time\\nwhile True: time.sleep(3600)"])
    text = str(helper.pid) if helper else "ok"
    emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
    emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-idle"})
    if n == 0:
        os._exit(0)  # after the turn, while the conversation is idle
"""


async def test_an_idle_exit_is_seen_and_the_next_turn_respawns(fallback: Fallback, tmp_path: Path) -> None:
    rec = Recorder()
    helpers: list[PidWatch] = []  # each process's first turn starts one
    try:
        with trio.fail_after(60):  # hang guard only
            async with open_conversation(
                script_agent(tmp_path, IDLE_EXIT_AGENT), plugins=PLUGINS, sinks=[rec], parent_env=ENV
            ) as conv:
                events = [ev async for ev in conv.send("one")]
                assert isinstance(events[-1], TurnCompleted)
                helpers.append(PidWatch(int("".join(ev.text for ev in events if isinstance(ev, TextDelta)))))
                first = conv.process
                assert first is not None
                exited = await rec.wait_for(lambda ev: isinstance(ev, ProcessExited), timeout=30)
                assert isinstance(exited, ProcessExited) and not exited.requested and exited.returncode == 0
                # The exit's grace ended the output, and the leftover group went down with it.
                assert helpers[0].gone(30), "the helper holding the idle agent's stdout survived its exit"
                events = [ev async for ev in conv.send("two")]
                assert isinstance(events[-1], TurnCompleted)
                helpers.append(PidWatch(int("".join(ev.text for ev in events if isinstance(ev, TextDelta)))))
                assert conv.process is not first
        assert helpers[1].gone(30), "the second agent's helper survived the conversation's close"
    finally:
        for helper in helpers:
            helper.close()  # killed here if it survived


async def test_an_agent_ignoring_sigterm_is_killed_on_close(fallback: Fallback, tmp_path: Path) -> None:
    rec = Recorder()
    with trio.fail_after(60):  # hang guard only: the graces below are a fraction of a second
        async with open_conversation(
            launch(tmp_path, "hang"), plugins=PLUGINS, sinks=[rec], parent_env=ENV, term_grace=0.2
        ) as conv:
            stream = conv.send("hi")
            async for _event in stream:
                break  # the turn has started; the agent will never answer
            assert conv.process is not None
            pid = conv.process.pid
    exited = [ev for ev in rec.events if isinstance(ev, ProcessExited)]
    assert len(exited) == 1 and exited[0].requested
    # SIGTERM if it arrived before the fixture could ignore it, else SIGKILL.
    assert exited[0].signal in (signal.SIGTERM, signal.SIGKILL)
    assert pid not in our_children()


async def test_a_grandchild_holding_stdout_ends_the_turn_and_goes_down_with_it(
    fallback: Fallback, tmp_path: Path
) -> None:
    # Without a pidfd the exit is waited for without reaping too (waitid(WNOWAIT) in a thread,
    # a kqueue NOTE_EXIT on macOS): the leader's pid names our group until the stop's killpg.
    helper: PidWatch | None = None
    try:
        with trio.fail_after(60):  # hang guard only
            async with open_conversation(
                script_agent(tmp_path, GRANDCHILD_AGENT), plugins=PLUGINS, parent_env=ENV
            ) as conv:
                events = [ev async for ev in conv.send("hi")]
                helper = PidWatch(int("".join(ev.text for ev in events if isinstance(ev, TextDelta))))
        terminal = events[-1]
        assert isinstance(terminal, TurnFailed) and terminal.code == "exit_before_result"
        assert "code=5" in terminal.message
        assert helper.gone(30), "the grandchild holding stdout survived the conversation"
    finally:
        if helper is not None:
            helper.close()  # killed here if it survived
    assert our_children() == []


async def test_many_conversations_leave_no_descriptor_and_no_child(fallback: Fallback, tmp_path: Path) -> None:
    spec = launch(tmp_path)

    async def one() -> None:
        async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV) as conv:
            assert isinstance(await conv.ask("ping"), TurnCompleted)

    with trio.fail_after(120):  # hang guard only
        # Warm up past the spawn count at which a run with pidfds starts its spawn servers
        # (their sockets are the run's, not a conversation's), and trio's own descriptors.
        for _ in range(spawn_client._SERVE_AFTER + 2):
            await one()
        fds_before = len(os.listdir("/proc/self/fd"))
        for _ in range(5):
            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(one)
    assert len(os.listdir("/proc/self/fd")) <= fds_before
    assert our_children() == []


async def test_a_silent_agent_fails_the_turn_after_the_first_output_bound(fallback: Fallback, tmp_path: Path) -> None:
    # The bound is a task of the conversation here (a timer of the watcher on Linux).
    with trio.fail_after(60):  # hang guard only: the bound below is half a second
        async with open_conversation(
            launch(tmp_path, "hang"), plugins=PLUGINS, parent_env=ENV, term_grace=0.2, first_output_timeout=0.5
        ) as conv:
            terminal = await conv.ask("anyone there?")
    assert isinstance(terminal, TurnFailed) and terminal.code == "protocol_mismatch", terminal


_RUN_ON_FALLBACK = """
import sys
from agentrt._os import child_watch, spawn


def no_watcher():
    raise SystemExit("the shared child watcher was asked for on a fallback path")


child_watch.AVAILABLE = False
child_watch.current_watcher = no_watcher
spawn.DEATH_SIGNAL_SUPPORTED = sys.argv[1] == "no-epoll"
from agentrt.cli import main

main(sys.argv[2:])
"""


@pytest.mark.parametrize("mode", ["no-pidfd", "no-epoll"])
def test_agentrt_run_answers_on_the_fallback_path(mode: str, tmp_path: Path) -> None:
    # A fresh interpreter: the whole command (its signal handling, its stdout writer) on the fallback.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "AWP_AGENT_CLI_EXECUTABLE": launch(tmp_path).executable,
    }
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_ON_FALLBACK, mode, "run", "--json", "--no-log", "hi"],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    types = [json.loads(line)["type"] for line in proc.stdout.splitlines()]
    assert types.count("turn_completed") == 1 and types[-1] == "process_exited", types
