"""The host engine (:class:`agentrt.lowlevel.HostedProcess`) over real fixture agent processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import open_conversation
from agentrt.dialect import HostCodec, Turn
from agentrt.errors import AgentrtError
from agentrt.events import Event, SessionStarted, TextDelta, TurnCompleted, TurnFailed
from agentrt.lowlevel import AgentProcess, HostedProcess, ProcessEnd, ProcessSpec, ProtocolProbe, RawTap
from agentrt.testing import fixture_agent_argv
from agentrt.testing._pids import our_children

from .test_conversation import ENV, PLUGINS, script_agent
from .test_fallback_paths import Fallback, fallback  # noqa: F401  (the fixture)

_AGENT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


class Host:
    """A test host: the engine's owner (a :class:`ProcessOwner`) that keeps every event, end and spawn."""

    def __init__(self, spec: ProcessSpec | None = None, mode: str = "normal") -> None:
        self.spec = spec
        self.mode = mode
        self.events: list[Event] = []
        self.ends: list[ProcessEnd] = []
        self.spawns: list[AgentProcess] = []
        self.launches: list[str | None] = []
        self.codecs: list[HostCodec] = []
        self.ended = trio.Event()
        self.changed = trio.Event()

    async def launch(self, resume: str | None, codec: HostCodec) -> ProcessSpec:
        self.launches.append(resume)
        if self.spec is not None:
            return self.spec
        extra = ("--resume", resume) if resume else ()
        return ProcessSpec(argv=fixture_agent_argv(self.mode, *extra), env=_AGENT_ENV, term_grace=1.0)

    def new_codec(self, resume: str | None) -> HostCodec:
        codec = PLUGINS.dialect("awp-jsonl").host_codec()
        codec.start(resume=resume, model=None, cwd=os.getcwd())
        self.codecs.append(codec)
        return codec

    def probe(self) -> ProtocolProbe | None:
        return None

    def tap(self, process: AgentProcess, number: int) -> RawTap | None:
        return None

    def idle(self) -> bool:
        return False

    async def on_spawn(self, process: AgentProcess) -> None:
        self.spawns.append(process)

    async def on_events(self, events: list[Event]) -> None:
        self.events.extend(events)
        self.changed.set()
        self.changed = trio.Event()

    async def on_oversize(self, process: AgentProcess, before: list[Event]) -> bool:
        raise AssertionError("no line is that long here")

    async def on_send_error(self, error: AgentrtError) -> None:
        raise AssertionError("awp-jsonl owes the agent nothing")

    async def on_mismatch(self, failure: TurnFailed) -> None:
        raise AssertionError("no probe here")

    async def on_exit(self, end: ProcessEnd) -> None:
        self.ends.append(end)
        self.ended.set()
        self.ended = trio.Event()

    async def wait_for(self, kind: type, count: int = 1) -> None:
        with trio.fail_after(30):  # a hang guard; the test waits on events
            while sum(isinstance(ev, kind) for ev in self.events) < count:
                await self.changed.wait()

    def engine(self, nursery: trio.Nursery, **kw: Any) -> HostedProcess:
        return HostedProcess(self, nursery=nursery, **kw)


async def test_an_engine_spawns_pumps_and_hands_over_the_exit_of_its_process() -> None:
    host = Host()
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery)
        proc = await engine.ensure()
        assert host.spawns == [proc] and engine.process is proc and engine.spawned == 1
        codec = engine.codec
        assert codec is not None and codec is host.codecs[0]
        await engine.send(codec.encode_turn(Turn.text("hello there")))
        await host.wait_for(TurnCompleted)
        assert "".join(ev.text for ev in host.events if isinstance(ev, TextDelta)) == "echo: hello there"
        assert await engine.ensure() is proc  # running: no second spawn
        status = await engine.stop()
        assert await engine.wait() == status  # the process context is left: nothing more to wait for
    assert status is not None and status.requested
    assert engine.exit_status == status
    [end] = host.ends
    assert end.process is proc and end.status == status
    assert proc.pid not in our_children()


STDERR_AGENT = """
for msg in lines():
    emit({"type": "system", "subtype": "init", "session_id": "s-2", "model": "m"})
    sys.stderr.write("the last words\\n"); sys.stderr.flush()
    sys.exit(5)
"""


async def test_without_the_shared_watcher_the_engine_reads_and_ends_a_process_the_same_way(
    fallback: Fallback,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    spec = script_agent(tmp_path, STDERR_AGENT).process_spec(PLUGINS.dialect("awp-jsonl"), parent_env=ENV)
    host = Host(spec)
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery)
        proc = await engine.ensure()
        fallback.check_process(proc)
        assert engine.codec is not None
        await engine.send(engine.codec.encode_turn(Turn.text("hi")))
        with trio.fail_after(30):  # a hang guard: the agent exits by itself
            status = await engine.wait()
    assert status is not None and status.returncode == 5 and not status.requested
    [end] = host.ends
    assert end.process is proc and end.output.eof
    assert proc.stderr_tail() == b"the last words\n"
    assert any(isinstance(ev, SessionStarted) for ev in host.events)


async def test_ensure_respawns_with_resume_and_the_codec_next_codec_gave() -> None:
    host = Host()
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery)
        first = await engine.ensure()
        assert engine.codec is not None
        await engine.send(engine.codec.encode_turn(Turn.text("one")))
        await host.wait_for(TurnCompleted)
        [session] = [ev for ev in host.events if isinstance(ev, SessionStarted)]
        await engine.stop()
        assert not engine.running
        codec = engine.next_codec(session.session_id)
        assert engine.next_codec(session.session_id) is codec  # asked twice, made once
        assert codec is not host.codecs[0]
        second = await engine.ensure(session.session_id)
        assert second is not first and engine.codec is codec and engine.spawned == 2
        assert host.launches == [None, session.session_id]
        await engine.send(codec.encode_turn(Turn.text("two")))
        await host.wait_for(TurnCompleted, 2)
        await engine.close()
        with pytest.raises(Exception, match="stopped") as info:
            await engine.ensure()
        assert getattr(info.value, "code", None) == "session_exited"
    assert [end.process for end in host.ends] == [first, second]
    assert sum(isinstance(ev, SessionStarted) and ev.session_id == session.session_id for ev in host.events) == 2


async def test_exit_wait_stops_a_process_that_closed_its_stdout_but_lives_on(tmp_path: Path) -> None:
    script = tmp_path / "closes-stdout"
    script.write_text(f"#!{sys.executable} -S\nimport os, sys\nos.close(1)\nsys.stdin.read()\n")
    script.chmod(0o755)
    host = Host(ProcessSpec(argv=(str(script),), env=_AGENT_ENV, shutdown_grace=0.1, term_grace=1.0))
    async with trio.open_nursery() as nursery:
        engine = host.engine(nursery, exit_wait=0.2)
        ended = host.ended
        proc = await engine.ensure()
        with trio.fail_after(30):
            await ended.wait()
    [end] = host.ends
    assert end.process is proc and end.output.eof
    assert end.status.requested  # it never exited by itself: the engine stopped it
    assert proc.pid not in our_children()


class CountingCodecs:
    """Wraps a dialect's host codecs to count ``encode_turn`` calls."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self.encoded = 0

    def __call__(self) -> HostCodec:
        codec = self._make()
        encode = codec.encode_turn

        def counted(turn: Turn) -> bytes:
            self.encoded += 1
            return encode(turn)

        codec.encode_turn = counted  # type: ignore[method-assign]
        return codec


async def test_encode_turn_runs_once_per_turn_even_after_a_respawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answers one turn, then exits: every later turn goes to a respawned process.
    launch = script_agent(
        tmp_path,
        """
        for msg in lines():
            emit({"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"})
            emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}})
            emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1", "result": "hi"})
            break
        """,
    )
    dialect = PLUGINS.dialect("awp-jsonl")
    counting = CountingCodecs(dialect.host_codec)
    monkeypatch.setattr(dialect, "host_codec", counting)
    exits = 0
    async with open_conversation(launch, plugins=PLUGINS, dialect=dialect, parent_env=ENV) as conv:
        for n in range(3):
            assert isinstance(await conv.ask(f"turn {n}"), TurnCompleted)
            proc = conv.process
            assert proc is not None
            with trio.fail_after(30):
                await proc.exited.wait()
            exits += 1
        assert counting.encoded == 3
    assert exits == 3
