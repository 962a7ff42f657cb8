"""The reference agent hosted as a stream-json CLI answers the SDK's control requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import TextDelta, TurnCompleted, TurnFailed
from agentrt.testing import ReplayResponse, serve_replay

from .reference_agent_helpers import AGENTRT_SCRIPT, agent_env, run_agent, text_round, user_line

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def test_initialize_is_answered_before_any_turn(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AGENTRT_STATE_DIR": str(tmp_path / "state")}
    request = {"type": "control_request", "request_id": "req_1", "request": {"subtype": "initialize", "hooks": None}}
    proc = subprocess.run(
        [AGENTRT, "agent", "--dialect", "stream-json", "--model", "m"],
        input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=30, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["type"] == "control_response"
    assert lines[0]["response"]["subtype"] == "success"
    assert lines[0]["response"]["request_id"] == "req_1"
    # Nothing else: no init before a user turn.
    assert len(lines) == 1


def _stuck_round(first: str) -> ReplayResponse:
    # The first piece at once, the rest only after a minute: the turn is mid-stream
    # for as long as the test needs (it interrupts long before).
    chunks = text_round(first, "never seen")
    return ReplayResponse.sse([b"".join(chunks[:2]), b"".join(chunks[2:])], chunk_delay=60.0)


def _interrupt(request_id: str) -> bytes:
    return json.dumps({"type": "control_request", "request_id": request_id,
                       "request": {"subtype": "interrupt"}}).encode() + b"\n"


async def test_interrupt_ends_the_running_turn_and_keeps_the_session(tmp_path: Path) -> None:
    async with serve_replay([_stuck_round("partial "), ReplayResponse.sse(text_round("second"))]) as server:
        env = agent_env(tmp_path, server.url)
        async with run_agent(env, "--dialect", "stream-json", "--include-partial-messages", "--model", "m") as agent:
            await agent.send(user_line("first"))
            seen: list[dict[str, object]] = []
            while not any(o.get("type") == "assistant" or (o.get("type") == "stream_event") for o in seen):
                obj = await agent.line()
                assert obj is not None
                seen.append(obj)
            await agent.send(_interrupt("req_int_1"))
            rest = await agent.until_result()
            # A line sent mid-turn waits for the turn; the interrupt is answered at once.
            responses = [o for o in rest if o.get("type") == "control_response"]
            assert [r["response"]["request_id"] for r in responses] == ["req_int_1"]  # type: ignore[index]
            assert responses[0]["response"]["subtype"] == "success"  # type: ignore[index]
            result = rest[-1]
            assert result["subtype"] == "error_during_execution" and result["is_error"] is True
            assert result["result"] == "turn_interrupted"
            text = "".join(
                o["event"]["delta"]["text"]  # type: ignore[index]
                for o in seen + rest
                if o.get("type") == "stream_event" and o["event"].get("type") == "content_block_delta"  # type: ignore[union-attr]
            )
            assert "never seen" not in text
            # The session goes on, and remembers what was said before the interrupt.
            await agent.send(user_line("again"))
            second = await agent.until_result()
            assert second[-1]["subtype"] == "success" and second[-1]["result"] == "second"
            await agent.close_stdin()
            assert await agent.wait() == 0
        messages = server.requests[1].json["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert messages[0]["content"] == "first" and messages[1]["content"] == "partial "


async def test_an_interrupt_between_turns_changes_nothing(tmp_path: Path) -> None:
    async with serve_replay([ReplayResponse.sse(text_round("one"))]) as server:
        env = agent_env(tmp_path, server.url)
        async with run_agent(env, "--dialect", "stream-json", "--include-partial-messages", "--model", "m") as agent:
            await agent.send(_interrupt("req_idle"))
            ack = await agent.line()
            assert ack is not None and ack["type"] == "control_response"
            await agent.send(user_line("hi"))
            out = await agent.until_result()
            assert out[-1]["subtype"] == "success" and out[-1]["result"] == "one"
            await agent.close_stdin()
            assert await agent.wait() == 0


async def test_cancel_turn_interrupts_a_stream_json_agent_in_place(tmp_path: Path) -> None:
    """The host side: cancel_turn sends the interrupt; the same process answers the next turn."""
    async with serve_replay([_stuck_round("partial "), ReplayResponse.sse(text_round("after"))]) as server:
        env = agent_env(tmp_path, server.url)
        launch = LaunchSpec(
            executable=AGENTRT_SCRIPT,
            prefix_args=("agent", "--dialect", "stream-json", "--include-partial-messages"),
            protocol="stream-json",
            env_entries=env,
        )
        async with open_conversation(launch, parent_env={"PATH": os.environ["PATH"]}) as conv:
            stream = conv.send("first")
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
            pid = conv.process.pid if conv.process is not None else None
            with trio.fail_after(10):
                await conv.cancel_turn()
                terminal = await stream.result()
            assert isinstance(terminal, TurnFailed) and terminal.code == "turn_cancelled"
            assert "turn_interrupted" in terminal.message  # the agent's own code, kept in the message
            again = await conv.ask("again")
            assert isinstance(again, TurnCompleted) and again.result == "after"
            assert conv.process is not None and conv.process.pid == pid  # interrupted, not restarted
