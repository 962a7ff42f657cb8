"""Claude Code through ``@zed-industries/claude-agent-acp``, hosted over ACP, against a fake Anthropic API.

The adapter (npm, in ``.peers/``) runs the real Claude Code CLI
(``CLAUDE_CODE_EXECUTABLE``, the native binary its npm package ships) with
``ANTHROPIC_BASE_URL`` on a loopback fake (:mod:`agentrt.testing.fake_apis`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import ControlRequest, Event, ProcessExited, RawEvent, TextDelta, ToolResult, TurnCompleted
from agentrt.permissions import PermissionDecision, PermissionRequest, deny_all
from agentrt.testing.fake_apis import serve_fake_anthropic
from agentrt.testing.real_peers import CLAUDE_AGENT_ACP, CLAUDE_CODE, peer_path
from agentrt_acp.codec import AcpDialect

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))
ADAPTER = peer_path(CLAUDE_AGENT_ACP)
CLAUDE = peer_path(CLAUDE_CODE)
BOUND = 120  # a hang guard only: the real CLI starts slowly on a busy machine


def _launch(home: Path, url: str) -> LaunchSpec:
    node = shutil.which("node")
    if node is None or not ADAPTER.is_file() or not CLAUDE.is_file():
        if os.environ.get("CI"):
            pytest.fail("node and .peers/ (npm ci) are required in CI")
        pytest.skip("claude-agent-acp or Claude Code is not installed (node, and `npm ci` in .peers/)")
    env = {
        "CLAUDE_CODE_EXECUTABLE": str(CLAUDE),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-test-not-a-secret",
        "HOME": str(home),
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return LaunchSpec(
        executable=os.path.realpath(node),
        prefix_args=(str(ADAPTER),),
        env_entries=env,
        protocol="acp",
        model="claude-test",
    )


async def _turn(conv: Any, prompt: str) -> tuple[list[Event], Any]:
    events: list[Event] = []
    with trio.fail_after(BOUND):
        stream = conv.send(prompt)
        async for ev in stream:
            events.append(ev)
    return events, stream.terminal


async def test_claude_code_through_claude_agent_acp(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    parent = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    with serve_fake_anthropic("Hello from the fake API.") as api:
        launch = _launch(home, api.url)
        async with open_conversation(
            launch, dialect=AcpDialect(), permission_policy=deny_all, parent_env=parent, cwd=str(work), term_grace=5
        ) as conv:
            first, result = await _turn(conv, "hello")
            assert isinstance(result, TurnCompleted), result
            assert "".join(ev.text for ev in first if isinstance(ev, TextDelta)) == "Hello from the fake API."
            assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (10, 5)
            _, again = await _turn(conv, "again")
            assert isinstance(again, TurnCompleted) and again.session_id == result.session_id
            session = conv.session_id
            assert session is not None
            # The model went through the session, not argv: the API saw it.
            assert {r.get("model") for r in api.requests} == {"claude-test"}
        # The adapter does not exit when stdin closes: the bounded stop ended it.
        assert conv.exit_status is not None and conv.exit_status.requested
        async with open_conversation(
            launch,
            dialect=AcpDialect(),
            permission_policy=deny_all,
            parent_env=parent,
            cwd=str(work),
            resume=session,
            term_grace=5,
        ) as conv:
            events, resumed = await _turn(conv, "third")
            assert isinstance(resumed, TurnCompleted) and resumed.session_id == session
            # The history replayed by session/load is not this turn's reply text.
            assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "Hello from the fake API."
            assert [ev for ev in events if isinstance(ev, RawEvent) and ev.name == "replay/agent_message_chunk"]
            assert not [ev for ev in events if isinstance(ev, ProcessExited)]


@pytest.mark.parametrize("allow", [False, True])
async def test_claude_code_tool_use_asks_agentrts_permission_policy(tmp_path: Path, allow: bool) -> None:
    """The fake API asks for ``Bash``; the adapter's ``session/request_permission`` reaches the policy."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    parent = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    asked: list[PermissionRequest] = []

    async def policy(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(allow=True) if allow else await deny_all(request)

    with serve_fake_anthropic(tool_command="echo hi > tool-ran.txt") as api:
        launch = _launch(home, api.url)
        async with open_conversation(
            launch, dialect=AcpDialect(), permission_policy=policy, parent_env=parent, cwd=str(work), term_grace=5
        ) as conv:
            events, result = await _turn(conv, "write the file")
    assert isinstance(result, TurnCompleted), result
    (request,) = asked
    assert request.input.get("command") == "echo hi > tool-ran.txt"
    (control,) = [ev for ev in events if isinstance(ev, ControlRequest)]
    # The adapter's options carry its own ids: agentrt chose by kind.
    assert {o["kind"] for o in control.request["options"]} >= {"allow_once", "reject_once"}
    (tool_result,) = api.tool_results
    text = "".join(ev.text for ev in events if isinstance(ev, TextDelta))
    assert text.startswith("The tool said: ")
    assert [ev.tool_use_id for ev in events if isinstance(ev, ToolResult)]
    if allow:
        assert (work / "tool-ran.txt").read_text() == "hi\n"
        assert not tool_result.get("is_error")
    else:
        assert not (work / "tool-ran.txt").exists()
        assert tool_result.get("is_error") is True


async def test_the_bridge_offers_claude_agent_acps_models_and_only_its_approval_keeping_modes(tmp_path: Path) -> None:
    # claude-agent-acp 0.x lists default, acceptEdits, plan and dontAsk: in two of them tools would not ask agentrt.
    import json

    from acp_line_client import line_client

    home = tmp_path / "home"
    home.mkdir()
    with serve_fake_anthropic("Planned.") as api:
        spec = _launch(home, api.url)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
            "AGENTRT_CONFIG": str(tmp_path / "none.toml"), "AWP_AGENT_CLI_EXECUTABLE": spec.executable,
            "AWP_AGENT_CLI_ARGS_JSON": json.dumps(list(spec.prefix_args)),
            "AWP_AGENT_CLI_ENV_JSON": json.dumps(dict(spec.env_entries)), "AWP_AGENT_CLI_PROTOCOL": "acp",
            "AWP_AGENT_DEFAULT_MODEL": "claude-test", "AGENTRT_FIRST_OUTPUT_TIMEOUT": str(BOUND),
        }  # fmt: skip
        with trio.fail_after(BOUND):  # hang guard only
            agentrt = str(Path(sys.executable).with_name("agentrt"))
            async with line_client([agentrt, "bridge", "--to", "acp"], env, str(tmp_path)) as client:
                new = await client.open(str(tmp_path))
                result = new["result"]
                sid = result["sessionId"]
                refused = await client.request("session/set_mode", {"sessionId": sid, "modeId": "acceptEdits"})
                planned = await client.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
                done = await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text",
                                                                                             "text": "hi"}]})
    assert "sonnet" in [m["modelId"] for m in result["models"]["availableModels"]], result
    assert [m["id"] for m in result["modes"]["availableModes"]] == ["default", "plan"], result
    assert refused["error"]["code"] == -32602, refused
    assert planned.get("result") == {}, planned
    assert done["result"]["stopReason"] == "end_turn" and client.text() == "Planned."
