"""Conversation turn rules over real fixture agent processes (awp-jsonl)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import AgentrtError, LaunchSpec, open_conversation
from agentrt._plugins import Plugins
from agentrt.dialect import TextBlock, Turn
from agentrt.events import (
    Diagnostic,
    Event,
    ProcessExited,
    SessionStarted,
    TextDelta,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from agentrt.testing import write_fixture_agent
from agentrt.testing._pids import our_children

PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl,stream-json"})
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


class Recorder:
    """A sink that keeps every event and lets a test wait for one."""

    name = "recorder"
    policy = "block"
    buffer_size = 16

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.seqs: list[int] = []
        self._changed = trio.Event()

    async def handle(self, batch: Any) -> None:
        for i, ev in enumerate(batch.events):
            self.events.append(ev)
            self.seqs.append(batch.first_seq + i)
        self._changed.set()
        self._changed = trio.Event()

    async def aclose(self) -> None:
        pass

    async def wait_for(self, predicate: Any, timeout: float = 10) -> Event:
        with trio.fail_after(timeout):
            while True:
                for ev in self.events:
                    if predicate(ev):
                        return ev
                await self._changed.wait()


def launch(tmp_path: Path, mode: str = "normal", **kw: Any) -> LaunchSpec:
    exe = write_fixture_agent(tmp_path, mode)
    return LaunchSpec.from_env({}, executable=exe, model="m-1", **kw)


def script_agent(tmp_path: Path, body: str) -> LaunchSpec:
    """A one-off fixture agent: a stdlib Python script with ``emit`` and ``lines`` helpers."""
    path = tmp_path / "scripted-agent"
    path.write_text(
        f"#!{sys.executable} -S\n"
        "import json, sys, time\n"
        "def emit(o):\n"
        "    sys.stdout.write(json.dumps(o) + '\\n'); sys.stdout.flush()\n"
        "def lines():\n"
        "    for line in sys.stdin:\n"
        "        if line.strip():\n"
        "            yield json.loads(line)\n" + textwrap.dedent(body)
    )
    path.chmod(0o755)
    return LaunchSpec.from_env({}, executable=str(path), model="m-1")


async def test_two_turns_stream_text_and_keep_one_session(tmp_path: Path) -> None:
    rec = Recorder()
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, sinks=[rec], parent_env=ENV) as conv:
        first = [ev async for ev in conv.send("hello")]
        second = [ev async for ev in conv.send("again")]
        assert conv.session_id is not None
    for turn in (first, second):
        assert isinstance(turn[0], TurnStarted)
        assert isinstance(turn[-1], TurnCompleted)
        assert sum(isinstance(ev, (TurnCompleted, TurnFailed)) for ev in turn) == 1
        assert "".join(ev.text for ev in turn if isinstance(ev, TextDelta))
    assert [type(ev) for ev in first].count(SessionStarted) == 1
    assert not any(isinstance(ev, SessionStarted) for ev in second)  # repeated init is a no-op
    terminal = first[-1]
    assert isinstance(terminal, TurnCompleted) and terminal.usage is not None
    assert terminal.session_id == conv.session_id
    # The sink saw every event once, in order, with gap-free sequence numbers.
    assert rec.seqs == list(range(len(rec.seqs)))
    exited = rec.events[-1]
    assert isinstance(exited, ProcessExited) and exited.requested


async def test_exit_mid_turn_fails_with_exit_before_result(tmp_path: Path) -> None:
    async with open_conversation(launch(tmp_path, "exit-mid-turn"), plugins=PLUGINS, parent_env=ENV) as conv:
        events = [ev async for ev in conv.send("hi")]
    terminal = events[-1]
    assert isinstance(terminal, TurnFailed)
    assert terminal.code == "exit_before_result"
    assert "code=3" in terminal.message
    assert any(isinstance(ev, TextDelta) for ev in events)


async def test_flood_without_newline_is_oversize_and_stops_the_agent(tmp_path: Path) -> None:
    rec = Recorder()
    async with open_conversation(launch(tmp_path, "flood"), plugins=PLUGINS, sinks=[rec], parent_env=ENV) as conv:
        terminal = await conv.ask("flood me")
        assert isinstance(terminal, TurnFailed)
        assert terminal.code == "runtime_output_oversize"
        exited = await rec.wait_for(lambda ev: isinstance(ev, ProcessExited))
    assert isinstance(exited, ProcessExited) and exited.requested


async def test_malformed_lines_are_diagnostics_and_the_stream_goes_on(tmp_path: Path) -> None:
    rec = Recorder()
    async with open_conversation(
        launch(tmp_path, "malformed"), plugins=PLUGINS, sinks=[rec], parent_env=ENV
    ) as conv:
        events = [ev async for ev in conv.send("hi")]
    assert isinstance(events[-1], TurnCompleted)
    diags = [ev for ev in events if isinstance(ev, Diagnostic) and ev.code == "malformed_output_line"]
    assert diags, events
    # Malformed lines are never rendered as text.
    text = "".join(ev.text for ev in events if isinstance(ev, TextDelta))
    assert all(d.detail.split(": ", 1)[1] not in text for d in diags)


async def test_output_before_input_is_a_diagnostic_of_no_turn(tmp_path: Path) -> None:
    rec = Recorder()
    async with open_conversation(
        launch(tmp_path, "output-before-input"), plugins=PLUGINS, sinks=[rec], parent_env=ENV
    ) as conv:
        await rec.wait_for(lambda ev: isinstance(ev, Diagnostic) and ev.code == "output_before_input")
        events = [ev async for ev in conv.send("hi")]
    assert not any(isinstance(ev, Diagnostic) and ev.code == "output_before_input" for ev in events)
    assert isinstance(events[-1], TurnCompleted)


async def test_bad_session_id_is_a_diagnostic_and_never_resumed(tmp_path: Path) -> None:
    async with open_conversation(
        launch(tmp_path, "bad-session-id"), plugins=PLUGINS, parent_env=ENV
    ) as conv:
        events = [ev async for ev in conv.send("hi")]
        assert conv.session_id is None
    assert any(isinstance(ev, Diagnostic) and ev.code == "invalid_session_id" for ev in events)
    assert not any(isinstance(ev, SessionStarted) for ev in events)


async def test_second_terminal_event_is_a_diagnostic(tmp_path: Path) -> None:
    spec = script_agent(
        tmp_path,
        """
        for msg in lines():
            emit({"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"})
            emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1"})
            emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1"})
        """,
    )
    rec = Recorder()
    async with open_conversation(spec, plugins=PLUGINS, sinks=[rec], parent_env=ENV) as conv:
        events = [ev async for ev in conv.send("hi")]
        await rec.wait_for(lambda ev: isinstance(ev, Diagnostic) and ev.code == "duplicate_terminal_event")
    assert sum(isinstance(ev, TurnCompleted) for ev in events) == 1
    assert sum(isinstance(ev, TurnCompleted) for ev in rec.events) == 1


async def test_unsupported_block_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    class Audio:
        pass

    rec = Recorder()
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, sinks=[rec], parent_env=ENV) as conv:
        with pytest.raises(AgentrtError) as info:
            await conv.ask(Turn(content=(TextBlock(text="x"), Audio())))  # type: ignore[arg-type]
        assert info.value.code == "unsupported_content_block"
        # Nothing was sent: the next turn is the first the agent sees.
        terminal = await conv.ask("hello")
        assert isinstance(terminal, TurnCompleted)
    assert sum(isinstance(ev, TurnStarted) for ev in rec.events) == 1


async def test_cancelling_the_callers_scope_stops_the_child(tmp_path: Path) -> None:
    pid = None
    rec = Recorder()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery, open_conversation(
            launch(tmp_path, "hang"), plugins=PLUGINS, sinks=[rec], parent_env=ENV, term_grace=0.2
        ) as conv:
            assert conv.process is not None
            pid = conv.process.pid

            async def cancel_once_the_turn_is_out() -> None:
                # The turn was written (its TurnStarted went out): now the caller gives up.
                await rec.wait_for(lambda ev: isinstance(ev, TurnStarted), timeout=30)
                scope.cancel()

            nursery.start_soon(cancel_once_the_turn_is_out)
            await conv.ask("never answered")
    assert scope.cancelled_caught
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: not our child any more
    assert not Path(f"/proc/{pid}").exists()


async def test_sink_failing_every_batch_is_detached_after_three_and_the_conversation_goes_on(tmp_path: Path) -> None:
    class Broken:
        name = "broken"
        policy = "block"
        buffer_size = 1

        def __init__(self) -> None:
            self.calls = 0

        async def handle(self, batch: Any) -> None:
            self.calls += 1
            raise RuntimeError("disk on fire")

        async def aclose(self) -> None:
            pass

    rec = Recorder()
    broken = Broken()
    async with open_conversation(
        launch(tmp_path), plugins=PLUGINS, sinks=[broken, rec], parent_env=ENV
    ) as conv:
        first = await conv.ask("one")
        second = await conv.ask("two")
    assert isinstance(first, TurnCompleted) and isinstance(second, TurnCompleted)
    codes = [ev.code for ev in rec.events if isinstance(ev, Diagnostic) and "broken" in ev.detail]
    assert codes == ["sink_failed", "sink_failed", "sink_detached"]
    assert broken.calls == 3  # nothing more once detached
    assert conv.sink_failures == {"broken": 3}


async def test_sink_failing_on_one_batch_keeps_receiving_later_events(tmp_path: Path) -> None:
    class Flaky(Recorder):
        name = "flaky"

        def __init__(self) -> None:
            super().__init__()
            self.failed_once = False

        async def handle(self, batch: Any) -> None:
            if not self.failed_once and any(isinstance(ev, TurnStarted) for ev in batch.events):
                self.failed_once = True
                raise UnicodeEncodeError("utf-8", "\ud83d", 0, 1, "surrogates not allowed")
            await super().handle(batch)

    rec = Recorder()
    flaky = Flaky()
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, sinks=[flaky, rec], parent_env=ENV) as conv:
        first = await conv.ask("one")
        second = await conv.ask("two")
    assert isinstance(first, TurnCompleted) and isinstance(second, TurnCompleted)
    # The failure is visible (to every sink, the failing one included) and recording went on.
    for sink in (rec, flaky):
        failed = [ev for ev in sink.events if isinstance(ev, Diagnostic) and ev.code.startswith("sink_")]
        assert [ev.code for ev in failed] == ["sink_failed"] and "flaky" in failed[0].detail
    assert sum(isinstance(ev, TurnCompleted) for ev in flaky.events) == 2
    assert [type(ev) for ev in flaky.events if not isinstance(ev, Diagnostic)] == [
        type(ev) for ev in rec.events if not isinstance(ev, Diagnostic)
    ][1:]  # everything but the one lost batch (its TurnStarted)
    assert conv.sink_failures == {"flaky": 1}


async def test_cancel_turn_keeps_the_conversation_usable_and_resumes(tmp_path: Path) -> None:
    argv_log = tmp_path / "argv.log"
    spec = script_agent(
        tmp_path,
        f"""
        with open({str(argv_log)!r}, "a") as f:
            f.write(json.dumps(sys.argv[1:]) + "\\n")
        resumed = "--resume" in sys.argv
        for n, msg in enumerate(lines()):
            text = msg["message"]["content"][-1]["text"]
            if n == 0:
                emit({{"type": "system", "subtype": "init", "session_id": "sess-42", "model": "m"}})
            if text == "slow":
                emit({{"type": "content_block_delta", "index": 0,
                      "delta": {{"type": "text_delta", "text": "thinking"}}}})
                time.sleep(60)
            emit({{"type": "content_block_delta", "index": 0,
                  "delta": {{"type": "text_delta", "text": "resumed" if resumed else "fresh"}}}})
            emit({{"type": "result", "subtype": "success", "is_error": False, "session_id": "sess-42"}})
        """,
    )
    async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV, term_grace=0.5) as conv:
        stream = conv.send("slow")
        async for ev in stream:
            if isinstance(ev, TextDelta):
                await conv.cancel_turn()
        assert isinstance(stream.terminal, TurnFailed)
        assert stream.terminal.code == "turn_cancelled"
        events = [ev async for ev in conv.send("quick")]
        assert isinstance(events[-1], TurnCompleted)
        assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "resumed"
    runs = argv_log.read_text().splitlines()
    assert len(runs) == 2
    assert "--resume" not in runs[0] and '"--resume", "sess-42"' in runs[1]


async def test_resume_id_is_validated_before_spawning(tmp_path: Path) -> None:
    with pytest.raises(AgentrtError) as info:
        async with open_conversation(launch(tmp_path), plugins=PLUGINS, resume="bad id!", parent_env=ENV):
            pass
    assert info.value.code == "invalid_resume_session_id"


async def test_spawn_failure_is_reported_on_entry(tmp_path: Path) -> None:
    spec = launch(tmp_path)
    # A valid launch whose exec fails: its interpreter does not exist.
    Path(spec.executable).write_text("#!/nonexistent/interpreter\n")
    with pytest.raises(AgentrtError) as info:
        async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV):
            pass
    assert info.value.code == "spawn_failed"


async def test_executable_deleted_after_validation_is_refused_on_entry(tmp_path: Path) -> None:
    spec = launch(tmp_path)
    os.unlink(spec.executable)
    with pytest.raises(AgentrtError) as info:
        async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV):
            pass
    assert info.value.code == "cli_executable_not_found"


async def test_many_conversations_leak_no_descriptor_or_process(tmp_path: Path) -> None:
    spec = launch(tmp_path)
    count = int(os.environ.get("AGENTRT_LEAK_CONVERSATIONS", "1000"))

    async def one() -> None:
        async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV) as conv:
            terminal = await conv.ask("ping")
            assert isinstance(terminal, TurnCompleted)

    # The run's child watcher and its two spawn servers (a run starts them from its ninth
    # child on): one each, not per conversation.
    for _ in range(10):
        await one()
    fds_before = len(os.listdir("/proc/self/fd"))

    for start in range(0, count, 4):
        async with trio.open_nursery() as nursery:
            for _ in range(min(4, count - start)):
                nursery.start_soon(one)
    assert len(os.listdir("/proc/self/fd")) <= fds_before
    assert our_children() == []  # no child left, zombie or alive


async def test_batches_yield_the_turn_a_chunk_at_a_time(tmp_path: Path) -> None:
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, parent_env=ENV) as conv:
        stream = conv.send("hello")
        batches = [list(b) async for b in stream.batches()]
        per_event = [ev async for ev in conv.send("again")]
    flat = [ev for b in batches for ev in b]
    assert isinstance(flat[0], TurnStarted) and isinstance(flat[-1], TurnCompleted)
    assert stream.terminal is flat[-1]
    assert sum(isinstance(ev, (TurnCompleted, TurnFailed)) for ev in flat) == 1
    # The same kinds of events as per-event iteration of an identical turn.
    kinds = [type(ev) for ev in flat if not isinstance(ev, SessionStarted)]
    assert kinds == [type(ev) for ev in per_event]


async def test_result_after_a_partial_read_finds_a_terminal_read_with_it(tmp_path: Path) -> None:
    # The whole turn in one write, so it arrives in one read: iterating stops at the
    # first delta with the terminal event already buffered, and result() must find it
    # there (draining by batches), not wait for more.
    spec = script_agent(
        tmp_path,
        """
        for msg in lines():
            out = [
                {"type": "system", "subtype": "init", "session_id": "one-read", "model": "m"},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "b"}},
                {"type": "result", "subtype": "success", "is_error": False, "session_id": "one-read", "result": "ab"},
            ]
            sys.stdout.write("".join(json.dumps(o) + "\\n" for o in out)); sys.stdout.flush()
        """,
    )
    async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV) as conv:
        for _ in range(3):
            stream = conv.send("go")
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
            with trio.fail_after(10):
                terminal = await stream.result()
            assert isinstance(terminal, TurnCompleted) and terminal.result == "ab"


GRANDCHILD_AGENT = """
import os, subprocess
for msg in lines():
    emit({"type": "system", "subtype": "init", "session_id": "s-grand", "model": "m-1"})
    # A helper that inherits stdout (as an MCP server would) and outlives the agent.
    helper = subprocess.Popen([sys.executable, "-S", "-c", "import time\\nwhile True: time.sleep(3600)"])
    emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": str(helper.pid)}})
    os._exit(5)
"""


async def test_exit_before_result_while_a_grandchild_holds_stdout_ends_the_turn(tmp_path: Path) -> None:
    from agentrt.testing._pids import PidWatch

    spec = script_agent(tmp_path, GRANDCHILD_AGENT)
    helper: PidWatch | None = None
    try:
        with trio.fail_after(60):  # hang guard only: today this turn never ends
            async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV) as conv:
                events = [ev async for ev in conv.send("hi")]
                helper = PidWatch(int("".join(ev.text for ev in events if isinstance(ev, TextDelta))))
        terminal = events[-1]
        assert isinstance(terminal, TurnFailed) and terminal.code == "exit_before_result"
        assert "code=5" in terminal.message
        # The agent's leftover process group went down with the turn.
        assert helper.gone(30), "the grandchild holding stdout survived"
    finally:
        if helper is not None:
            helper.close()  # killed here if it survived


async def test_swapped_executable_is_refused_before_the_respawn(tmp_path: Path) -> None:
    spec = launch(tmp_path, "exit-mid-turn")
    exe = Path(spec.executable)
    real = exe.with_name("real-agent")
    async with open_conversation(spec, plugins=PLUGINS, parent_env=ENV) as conv:
        first = await conv.ask("one")
        assert isinstance(first, TurnFailed) and first.code == "exit_before_result"
        # Between two turns the file becomes a symlink to a (perfectly good) agent.
        exe.rename(real)
        exe.symlink_to(real)
        second = await conv.ask("two")
        assert isinstance(second, TurnFailed) and second.code == "cli_executable_is_symlink"
        exe.unlink()
        real.rename(exe)
        exe.chmod(0o644)
        third = await conv.ask("three")
        assert isinstance(third, TurnFailed) and third.code == "cli_executable_not_executable"
        exe.unlink()
        fourth = await conv.ask("four")
        assert isinstance(fourth, TurnFailed) and fourth.code == "cli_executable_not_found"
