"""stream-json over real pipes: a fixture CLI replays the real captures through a Conversation.

This is the dialect in its place in the host path (launch → process → framing
→ codec → conversation), including the control-request round trip that the
permission policy answers through ``encode_control_response``.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import ControlRequest, SessionStarted, TextDelta, TurnCompleted, TurnFailed
from agentrt.permissions import DENY_MESSAGE, PermissionDecision, PermissionRequest, deny_all
from agentrt_stream_json import fixture_agent
from agentrt_stream_json.codec import StreamJsonDialect

FIXTURE = Path(fixture_agent.__file__)
CAPTURES = Path(__file__).resolve().parent / "captures" / "claude-code"
BOUND = 20


def _executable(tmp_path: Path) -> str:
    # The launch contract wants a regular, non-symlink executable: a script naming the interpreter.
    path = tmp_path / "fake-claude"
    path.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    path.chmod(stat.S_IRWXU)
    return str(path)


def _launch(tmp_path: Path, **env: str) -> LaunchSpec:
    return LaunchSpec(executable=_executable(tmp_path), env_entries=env, protocol="stream-json", model="claude-test")


def _parent_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}


async def _turn(conv: Any, prompt: str) -> tuple[list[Any], Any]:
    events = []
    with trio.fail_after(BOUND):
        stream = conv.send(prompt)
        async for ev in stream:
            events.append(ev)
        result = await stream.result()
    return events, result


async def test_basic_two_turns_through_a_real_process(tmp_path: Path) -> None:
    launch = _launch(tmp_path, STREAM_JSON_FIXTURE_CAPTURE=str(CAPTURES / "basic_two_turns.stdout.jsonl"))
    async with open_conversation(
        launch, dialect=StreamJsonDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        first, result1 = await _turn(conv, "hello")
        second, result2 = await _turn(conv, "second turn")
        assert conv.session_id == "d1efd9e4-e2ea-5ec5-888a-c55c1f181ffe"  # fixed by record.py
    texts = ["".join(e.text for e in evs if isinstance(e, TextDelta)) for evs in (first, second)]
    assert texts == [
        "Hello from the fake server (user message 1). You said: hello",
        "Hello from the fake server (user message 2). You said: second turn",
    ]
    assert isinstance(result1, TurnCompleted) and isinstance(result2, TurnCompleted)
    assert (result1.usage and result1.usage.input_tokens, result2.usage and result2.usage.input_tokens) == (10, 10)


async def test_partial_messages_through_a_real_process(tmp_path: Path) -> None:
    capture = CAPTURES / "tool_use_allowed_partial.stdout.jsonl"
    launch = _launch(tmp_path, STREAM_JSON_FIXTURE_CAPTURE=str(capture))
    async with open_conversation(
        launch, dialect=StreamJsonDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, "USE_TOOL please")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "I will run a command.The tool said: hi"
    assert [e.summary for e in events if e.type == "tool_use"] == ["Running: echo hi"]
    assert isinstance(result, TurnCompleted) and result.result == "The tool said: hi"


async def test_http_500_fails_the_turn_through_a_real_process(tmp_path: Path) -> None:
    launch = _launch(tmp_path, STREAM_JSON_FIXTURE_CAPTURE=str(CAPTURES / "http_500.stdout.jsonl"))
    async with open_conversation(
        launch, dialect=StreamJsonDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, "FAIL_500 now")
    assert isinstance(result, TurnFailed) and result.code == "api_error_500"
    assert [e.kind for e in events if e.type == "status"] == ["status", "api_retry", "api_retry", "api_error"]


async def test_can_use_tool_default_policy_denies(tmp_path: Path) -> None:
    launch = _launch(tmp_path, STREAM_JSON_FIXTURE_MODE="permission")
    async with open_conversation(
        launch, dialect=StreamJsonDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, "run it")
    assert [e.request_id for e in events if isinstance(e, ControlRequest)] == ["perm_1"]
    assert isinstance(result, TurnCompleted) and result.result == f"denied:{DENY_MESSAGE}"
    assert next(e for e in events if isinstance(e, SessionStarted)).session_id == "fixture-session-1"


async def test_can_use_tool_allowed_with_rewritten_input(tmp_path: Path) -> None:
    seen: list[PermissionRequest] = []

    async def policy(request: PermissionRequest) -> PermissionDecision:
        seen.append(request)
        return PermissionDecision(allow=True, updated_input={"command": "echo safe"})

    launch = _launch(tmp_path, STREAM_JSON_FIXTURE_MODE="permission")
    async with open_conversation(
        launch, dialect=StreamJsonDialect(), permission_policy=policy, parent_env=_parent_env()
    ) as conv:
        _, first = await _turn(conv, "run it")
        _, second = await _turn(conv, "again")
    assert [(r.tool_name, dict(r.input), r.request_id) for r in seen] == [
        ("Bash", {"command": "echo hi"}, "perm_1"),
        ("Bash", {"command": "echo hi"}, "perm_2"),
    ]
    assert isinstance(first, TurnCompleted) and first.result == "allowed:echo safe"
    assert isinstance(second, TurnCompleted) and second.result == "allowed:echo safe"
