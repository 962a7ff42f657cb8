"""Leaving a turn early: TurnStream.aclose(), `async with`, break, an exception, a cancelled scope.

Each way ends the turn as cancel_turn() does (the interrupt for stream-json, the bounded stop for
awp-jsonl), with exactly one terminal event, and the conversation's next turn works.  Real fixture
agents over real pipes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import agentrt
from agentrt import AgentrtError, LaunchSpec, TurnStream, open_conversation
from agentrt._plugins import Plugins
from agentrt.events import Event, TextDelta, TurnCompleted, TurnFailed, TurnStarted

from ..plugin_data import STREAM_JSON_AGENT

ROOT = Path(__file__).resolve().parents[2]
STREAM_JSON_CLI = STREAM_JSON_AGENT
PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl,stream-json"})
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
GUARD = 30  # hang guard only

# awp-jsonl (no interrupt): "wait" says "working" and never ends its turn; anything else is echoed.
AWP_AGENT = """
import json, sys
def out(obj):
    sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "shutdown":
        break
    text = msg["message"]["content"][0]["text"]
    out({"type": "system", "subtype": "init", "session_id": "awp-1", "model": "m"})
    if text == "wait":
        out({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "working"}})
        continue
    out({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "echo:" + text}})
    out({"type": "result", "subtype": "success", "is_error": False, "session_id": "awp-1"})
"""


class Terminals:
    """A sink that keeps the terminal events (and turn starts) it receives."""

    name = "terminals"
    policy = "block"
    buffer_size = 16

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def handle(self, batch: Any) -> None:
        self.events.extend(ev for ev in batch.events if isinstance(ev, (TurnStarted, TurnCompleted, TurnFailed)))

    async def aclose(self) -> None:
        pass


def _launch(tmp: Path, protocol: str) -> LaunchSpec:
    path = tmp / "agent"
    if protocol == "awp-jsonl":
        path.write_text(f"#!{sys.executable}\n{AWP_AGENT}")
        env: dict[str, str] = {}
    else:
        path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(STREAM_JSON_CLI)!r}, "
                        "run_name='__main__')\n")
        env = {"STREAM_JSON_FIXTURE_MODE": "stall"}
    path.chmod(0o755)
    return LaunchSpec(executable=str(path), protocol=protocol, env_entries=env)


async def _until_working(stream: TurnStream) -> None:
    async for event in stream:
        if isinstance(event, TextDelta) and "working" in event.text:
            return
    raise AssertionError("the turn ended before the agent said it was working")


async def _leave(conv: Any, way: str) -> TurnStream:
    """Start a turn that never ends by itself, and leave it the ``way`` named."""
    stream = conv.send("wait")
    if way == "aclose":
        await _until_working(stream)
        await stream.aclose()
    elif way == "async_with":
        async with conv.send("wait") as stream:
            await _until_working(stream)
    elif way == "break":
        async for event in stream:
            if isinstance(event, TextDelta):
                break
    elif way == "exception":
        with pytest.raises(LookupError):
            async for event in stream:
                if isinstance(event, TextDelta):
                    raise LookupError("the caller's own failure")
    elif way == "cancelled_scope":
        with trio.CancelScope() as scope:
            async for event in stream:
                if isinstance(event, TextDelta):
                    scope.cancel()
        assert scope.cancelled_caught
    return stream


def _codes(events: list[Event]) -> list[str]:
    return [ev.code if isinstance(ev, TurnFailed) else ev.type for ev in events]


@pytest.mark.parametrize("protocol", ["awp-jsonl", "stream-json"])
@pytest.mark.parametrize("way", ["aclose", "async_with", "break", "exception", "cancelled_scope"])
async def test_a_turn_left_early_ends_once_and_the_next_turn_works(tmp_path: Path, protocol: str, way: str) -> None:
    sink = Terminals()
    with trio.fail_after(GUARD):
        async with open_conversation(_launch(tmp_path, protocol), plugins=PLUGINS, parent_env=ENV,
                                     sinks=[sink]) as conv:
            pid = conv.process.pid if conv.process is not None else None
            left = await _leave(conv, way)
            if way in ("aclose", "async_with"):
                # Closed: the turn has ended by now, and the stream says how.
                assert isinstance(left.terminal, TurnFailed) and left.terminal.code == "turn_cancelled"
                assert [ev async for ev in left] == []  # a closed stream yields nothing more
            if protocol == "awp-jsonl":
                second = await conv.ask("again")
                assert isinstance(second, TurnCompleted)
            else:
                # Every turn of this agent waits for an interrupt: close this one too.
                async with conv.send("again") as stream:
                    await _until_working(stream)
                second = stream.terminal
                assert isinstance(second, TurnFailed) and second.code == "turn_cancelled"
                assert "the agent said" in second.message  # its own answer to the interrupt
                assert conv.process is not None and conv.process.pid == pid  # interrupted in place
    # One terminal event per turn, and the left one is turn_cancelled.
    assert _codes(sink.events) == ["turn_started", "turn_cancelled", "turn_started", _codes([second])[0]]


async def test_a_stream_never_iterated_writes_nothing_when_closed(tmp_path: Path) -> None:
    sink = Terminals()
    with trio.fail_after(GUARD):
        async with open_conversation(_launch(tmp_path, "awp-jsonl"), plugins=PLUGINS, parent_env=ENV,
                                     sinks=[sink]) as conv:
            async with conv.send("never sent"):
                pass
            assert await conv.ask("hello") == TurnCompleted(session_id="awp-1")
    assert _codes(sink.events) == ["turn_started", "turn_completed"]


async def test_send_while_another_task_reads_the_turn_is_turn_in_progress(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with open_conversation(_launch(tmp_path, "awp-jsonl"), plugins=PLUGINS, parent_env=ENV) as conv:
            stream = conv.send("wait")
            await _until_working(stream)
            async with trio.open_nursery() as nursery:
                reading = trio.Event()

                async def read_on() -> None:
                    reading.set()
                    await stream.result()

                nursery.start_soon(read_on)
                await reading.wait()
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(AgentrtError) as info:
                    async for _ in conv.send("second"):
                        pass
                assert info.value.code == "turn_in_progress"
                await stream.aclose()
            assert stream.terminal is not None and stream.terminal.code == "turn_cancelled"


def test_turn_stream_is_public() -> None:
    assert agentrt.TurnStream is TurnStream
    assert "TurnStream" in agentrt.__all__


class CancelOnStart(Terminals):
    """Records like :class:`Terminals`, and cancels ``scope`` when turn ``turn`` starts."""

    def __init__(self, turn: int) -> None:
        super().__init__()
        self.turn = turn
        self.scope: trio.CancelScope | None = None

    async def handle(self, batch: Any) -> None:
        await super().handle(batch)
        if any(isinstance(ev, TurnStarted) and ev.turn == self.turn for ev in batch.events):
            assert self.scope is not None
            self.scope.cancel()


async def test_a_turn_whose_start_is_cancelled_still_ends_once(tmp_path: Path) -> None:
    # The agent exits after its turn, leaving a grandchild that holds its stdout: the second send
    # waits for that output to end (EXIT_OUTPUT_GRACE) before it respawns the agent, and the caller's
    # scope is cancelled meanwhile (the turn's turn_started is out, its prompt not written).
    path = tmp_path / "agent"
    holder = "import subprocess; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
    path.write_text(f"#!{sys.executable}\n{AWP_AGENT}    {holder}\n    break\n")
    path.chmod(0o755)
    sink = CancelOnStart(turn=2)
    with trio.fail_after(GUARD):
        async with open_conversation(LaunchSpec(executable=str(path)), plugins=PLUGINS, parent_env=ENV,
                                     sinks=[sink]) as conv:
            assert isinstance(await conv.ask("one"), TurnCompleted)
            assert conv.process is not None
            await conv.process.exited.wait()
            with trio.CancelScope() as scope:
                sink.scope = scope
                async for _ in conv.send("two"):
                    pass
            assert scope.cancelled_caught
    # No later send ends it for it: the start itself ended the turn.
    assert _codes(sink.events) == ["turn_started", "turn_completed", "turn_started", "turn_cancelled"]
