"""ACP over real pipes: the host side against real ACP peers.

Peers: the TypeScript SDK's own example agent (npm ``@agentclientprotocol/sdk``
0.17, installed in ``.peers/`` by ``npm ci``), and a fixture agent built on the
Python SDK (``fixtures/acp_agent.py``: the SDK speaks the wire,
the fixture chooses what to say).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.errors import AgentrtError
from agentrt.events import (
    ControlRequest,
    Diagnostic,
    Event,
    ProcessExited,
    RawEvent,
    SessionStarted,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
)
from agentrt.permissions import PermissionDecision, PermissionRequest, deny_all
from agentrt.testing.real_peers import TS_ACP_EXAMPLE, peer_path
from agentrt_acp.codec import AcpDialect, AcpOptions

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "acp_agent.py"
TS_AGENT = peer_path(TS_ACP_EXAMPLE)
BOUND = 60  # a hang guard only: the TypeScript example sleeps a second between its steps


def _parent_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}


def _fixture_launch(tmp_path: Path, **env: str) -> LaunchSpec:
    # The launch contract wants a regular, non-symlink executable: a script naming the interpreter.
    path = tmp_path / "acp-fixture-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    path.chmod(stat.S_IRWXU)
    return LaunchSpec(executable=str(path), env_entries=env, protocol="acp", model="some-model")


def _ts_launch() -> LaunchSpec:
    node = shutil.which("node")
    if node is None or not TS_AGENT.is_file():
        if os.environ.get("CI"):
            pytest.fail("node and .peers/ (npm ci) are required in CI")
        pytest.skip("the TypeScript ACP peer is not installed (node, and `npm ci` in .peers/)")
    return LaunchSpec(executable=os.path.realpath(node), prefix_args=(str(TS_AGENT),), protocol="acp")


async def _turn(conv: Any, prompt: Any) -> tuple[list[Event], Any]:
    events: list[Event] = []
    with trio.fail_after(BOUND):
        stream = conv.send(prompt)
        async for ev in stream:
            events.append(ev)
    return events, stream.terminal


def _text(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if isinstance(ev, TextDelta))


async def _allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(allow=True)


# -- the TypeScript SDK's example agent ----------------------------------------------------


async def test_ts_example_agent_turn_denied_by_default() -> None:
    async with open_conversation(
        _ts_launch(), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, "hello")
        assert isinstance(result, TurnCompleted)
        assert conv.session_id is not None and result.session_id == conv.session_id
        tools = [ev for ev in events if isinstance(ev, ToolUse)]
        assert [(t.id, t.name, t.summary) for t in tools] == [
            ("call_1", "read", "Reading project files"),
            ("call_2", "edit", "Modifying critical configuration file"),
        ]
        assert [ev.tool_use_id for ev in events if isinstance(ev, ToolResult)] == ["call_1"]
        controls = [ev for ev in events if isinstance(ev, ControlRequest)]
        assert [c.subtype for c in controls] == ["can_use_tool"]
        assert controls[0].request["tool_name"] == "Modifying critical configuration file"
        # The reject option the agent offered was chosen: the agent says it skipped the change.
        assert "I'll skip the configuration update" in _text(events)
        assert not [ev for ev in events if isinstance(ev, Diagnostic)]


async def test_ts_example_agent_permission_allowed_by_policy() -> None:
    async with open_conversation(
        _ts_launch(), dialect=AcpDialect(), permission_policy=_allow, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, "hello")
        assert isinstance(result, TurnCompleted)
        assert "successfully updated the configuration" in _text(events)
        assert [ev.tool_use_id for ev in events if isinstance(ev, ToolResult)] == ["call_1", "call_2"]
        # Two turns on one session.
        _, result2 = await _turn(conv, "again")
        assert isinstance(result2, TurnCompleted) and result2.session_id == result.session_id


async def test_ts_example_agent_cancel_is_answered_by_the_agent() -> None:
    async with open_conversation(
        _ts_launch(), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        proc = conv.process
        events: list[Event] = []
        with trio.fail_after(BOUND):
            stream = conv.send("hello")
            async for ev in stream:
                events.append(ev)
                if isinstance(ev, TextDelta):
                    await conv.cancel_turn()
        result = stream.terminal
        assert isinstance(result, TurnFailed) and result.code == "turn_cancelled"
        # The agent's own prompt response ended the turn: the process was not stopped.
        assert result.raw == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}
        assert conv.process is proc and not [ev for ev in events if isinstance(ev, ProcessExited)]


async def test_ts_example_agent_resume_unsupported() -> None:
    async with open_conversation(
        _ts_launch(), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env(), resume="sess-1"
    ) as conv:
        events, result = await _turn(conv, "hello")
        assert isinstance(result, TurnFailed) and result.code == "resume_unsupported"
        assert not [ev for ev in events if isinstance(ev, TextDelta)]


# -- the fixture agent on the Python SDK -----------------------------------------------------


async def test_argv_has_no_model_or_resume_and_session_is_opened_in_band(tmp_path: Path) -> None:
    launch = _fixture_launch(tmp_path)
    servers = ({"name": "files", "command": "/bin/true", "args": [], "env": []},)
    dialect = AcpDialect(AcpOptions(mcp_servers=servers))
    async with open_conversation(
        launch, dialect=dialect, permission_policy=deny_all, parent_env=_parent_env(), cwd=str(tmp_path)
    ) as conv:
        assert conv.process is not None
        events, result = await _turn(conv, "whereami")
        assert isinstance(result, TurnCompleted)
        assert _text(events) == f'cwd={tmp_path} mcp=["files"]'
        started = [ev for ev in events if isinstance(ev, SessionStarted)]
        assert [ev.session_id for ev in started] == ["fixture-1"]
    assert launch.process_spec(dialect, resume="fixture-1").argv == (launch.executable,)


async def test_resume_loads_the_session_and_replay_is_not_reply_text(tmp_path: Path) -> None:
    async with open_conversation(
        _fixture_launch(tmp_path),
        dialect=AcpDialect(),
        permission_policy=deny_all,
        parent_env=_parent_env(),
        resume="fixture-7",
    ) as conv:
        events, result = await _turn(conv, "hi")
        assert isinstance(result, TurnCompleted) and result.session_id == "fixture-7"
        assert conv.session_id == "fixture-7"
        assert _text(events) == "echo:hi"
        assert [ev.name for ev in events if isinstance(ev, RawEvent) and ev.name.startswith("replay/")] == [
            "replay/user_message_chunk",
            "replay/agent_message_chunk",
        ]


async def test_resume_without_load_session_is_refused(tmp_path: Path) -> None:
    async with open_conversation(
        _fixture_launch(tmp_path, ACP_FIXTURE_NO_LOAD="1"),
        dialect=AcpDialect(),
        permission_policy=deny_all,
        parent_env=_parent_env(),
        resume="fixture-7",
    ) as conv:
        _, result = await _turn(conv, "hi")
        assert isinstance(result, TurnFailed) and result.code == "resume_unsupported"


@pytest.mark.parametrize(
    ("prompt", "code"),
    [
        ("stop:max_tokens", "max_tokens"),
        ("stop:max_turn_requests", "max_turn_requests"),
        ("stop:refusal", "refusal"),
        ("stop:cancelled", "turn_cancelled"),
        ("fail", "rpc_internal_error"),
    ],
)
async def test_stop_reasons_and_errors_fail_the_turn(tmp_path: Path, prompt: str, code: str) -> None:
    async with open_conversation(
        _fixture_launch(tmp_path), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, prompt)
        assert isinstance(result, TurnFailed) and result.code == code
        assert [ev for ev in events if isinstance(ev, (TurnCompleted, TurnFailed))] == [result]
        # The session goes on.
        _, again = await _turn(conv, "still here")
        assert isinstance(again, TurnCompleted)


async def test_usage_and_every_update_kind(tmp_path: Path) -> None:
    async with open_conversation(
        _fixture_launch(tmp_path), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        _, result = await _turn(conv, "usage")
        assert isinstance(result, TurnCompleted) and result.usage is not None
        assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.cache_read_input_tokens) == (
            10,
            5,
            2,
        )
        events, result = await _turn(conv, "extras")
        assert isinstance(result, TurnCompleted)
        statuses = [(ev.kind, ev.label) for ev in events if isinstance(ev, Status)]
        assert ("plan", "plan: 1/2 done") in statuses and ("mode", "ask") in statuses
        assert "available_commands_update" in [ev.name for ev in events if isinstance(ev, RawEvent)]
        assert [ev.text for ev in events if isinstance(ev, ThinkingDelta)] == ["thinking..."]
        (big,) = [ev for ev in events if isinstance(ev, ToolResult)]
        assert big.tool_use_id == "t2" and big.content["truncated"] is True
        assert (
            len(big.content["text"]) < 64 * 1024
            and len(big.raw["params"]["update"]["content"][0]["content"]["text"]) == 200_000
        )


async def test_permission_choice_by_kind_through_the_policy(tmp_path: Path) -> None:
    seen: list[PermissionRequest] = []

    async def policy(request: PermissionRequest) -> PermissionDecision:
        seen.append(request)
        return PermissionDecision(allow=True)

    async with open_conversation(
        _fixture_launch(tmp_path), dialect=AcpDialect(), permission_policy=policy, parent_env=_parent_env()
    ) as conv:
        events, _ = await _turn(conv, "permission")
        assert _text(events) == "chose yes-once"  # allow_once preferred to the allow_always listed first
        assert [(r.tool_name, dict(r.input)) for r in seen] == [("Edit config", {"path": "c.json"})]
    async with open_conversation(
        _fixture_launch(tmp_path), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, _ = await _turn(conv, "permission")
        assert _text(events) == "chose no-thanks"


async def test_client_requests_refused_by_default(tmp_path: Path) -> None:
    secret = tmp_path / "notes.txt"
    secret.write_text("hello file")
    async with open_conversation(
        _fixture_launch(tmp_path),
        dialect=AcpDialect(),
        permission_policy=deny_all,
        parent_env=_parent_env(),
        cwd=str(tmp_path),
    ) as conv:
        for prompt in (f"read {secret}", f"write {tmp_path / 'x.txt'} data", "terminal", "ext"):
            events, result = await _turn(conv, prompt)
            assert isinstance(result, TurnCompleted)
            assert _text(events).startswith("error -32601"), prompt
    assert not (tmp_path / "x.txt").exists()


async def test_fs_confined_to_cwd_when_enabled(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("line1\nline2\n")
    (tmp_path / "outside.txt").write_text("secret")
    (work / "escape").symlink_to(tmp_path / "outside.txt")
    dialect = AcpDialect(AcpOptions(fs_read=True, fs_write=True, max_file_bytes=1024))
    async with open_conversation(
        _fixture_launch(tmp_path),
        dialect=dialect,
        permission_policy=deny_all,
        parent_env=_parent_env(),
        cwd=str(work),
    ) as conv:
        answers = {}
        for prompt in (
            f"read {work / 'notes.txt'}",
            f"read {work}/../outside.txt",
            f"read {work / 'escape'}",
            f"read {tmp_path / 'outside.txt'}",
            "read relative.txt",
            f"read {work / 'missing.txt'}",
            f"write {work / 'new.txt'} written-data",
            f"write {work / 'big.txt'} {'y' * 2000}",
        ):
            events, _ = await _turn(conv, prompt)
            answers[prompt.split(" ")[1]] = _text(events)
    assert answers[str(work / "notes.txt")] == "content=line1\nline2\n"
    assert answers[f"{work}/../outside.txt"] == "error -32602 path_outside_cwd"
    assert answers[str(work / "escape")] == "error -32602 path_outside_cwd"
    assert answers[str(tmp_path / "outside.txt")] == "error -32602 path_outside_cwd"
    assert answers["relative.txt"] == "error -32602 invalid_path"
    assert answers[str(work / "missing.txt")] == "error -32002 resource_not_found"
    assert answers[str(work / "new.txt")] == "written" and (work / "new.txt").read_text() == "written-data"
    assert answers[str(work / "big.txt")] == "error -32602 file_too_large" and not (work / "big.txt").exists()


async def test_cancel_and_image_capability(tmp_path: Path) -> None:
    from agentrt.dialect import DocumentBlock, ImageBlock, TextBlock, Turn

    async with open_conversation(
        _fixture_launch(tmp_path), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(
            conv, Turn(content=(TextBlock(text="pic"), ImageBlock(media_type="image/png", data="iVBORw0KGgo=")))
        )
        assert isinstance(result, TurnCompleted) and _text(events) == "image:image/pngecho:pic"
        # The agent does not take embedded resources: refused before anything is written.
        with pytest.raises(AgentrtError) as info:
            await _turn(conv, Turn(content=(DocumentBlock(media_type="application/pdf", data="JVBERi0="),)))
        assert info.value.code == "unsupported_content_block"
        with trio.fail_after(BOUND):
            stream = conv.send("wait")
            async for ev in stream:
                if isinstance(ev, TextDelta):
                    await conv.cancel_turn()
        assert isinstance(stream.terminal, TurnFailed) and stream.terminal.code == "turn_cancelled"
        assert stream.terminal.raw["result"] == {"stopReason": "cancelled"}
        _, again = await _turn(conv, "after cancel")
        assert isinstance(again, TurnCompleted)


async def test_exit_before_the_prompt_response_and_malformed_lines(tmp_path: Path) -> None:
    async with open_conversation(
        _fixture_launch(tmp_path), dialect=AcpDialect(), permission_policy=deny_all, parent_env=_parent_env()
    ) as conv:
        events, result = await _turn(conv, "garbage")
        assert isinstance(result, TurnCompleted) and _text(events) == "beforeafter"
        assert [ev.code for ev in events if isinstance(ev, Diagnostic)] == ["malformed_output_line"]
        events, result = await _turn(conv, "exit")
        assert isinstance(result, TurnFailed) and result.code == "exit_before_result"
        assert _text(events) == "bye"
        assert [ev for ev in events if isinstance(ev, (TurnCompleted, TurnFailed))] == [result]
