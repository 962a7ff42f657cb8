"""``agentrt bridge --to stream-json`` driven by the real Claude Agent SDK.

The SDK's ``query()`` runs the bridge as its CLI (``cli_path``, with every flag
the SDK passes); the bridge hosts the stream-json fixture agent
(``agentrt_stream_json.fixture_agent``, mode ``permission``) over real pipes.  With
a ``can_use_tool`` callback the SDK launches the CLI with
``--permission-prompt-tool stdio``: the hosted agent's tool request then
reaches the callback as a ``can_use_tool`` control request, and its answer
goes back to the hosted agent.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentrt._bridge import parse_bridge_args
from agentrt.errors import AgentrtError
from agentrt.permissions import PermissionRequest

from ..plugin_data import STREAM_JSON_AGENT

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = STREAM_JSON_AGENT
BOUND = 60  # hang guard only


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!{sys.executable} -S\n{body}")
    path.chmod(stat.S_IRWXU)
    return str(path)


def _run_sdk(tmp_path: Path, can_use_tool: Any, command: str = "echo hi") -> list[Any]:
    """One SDK ``query()`` of one turn through the bridge; every message it yields."""
    from claude_agent_sdk import ClaudeAgentOptions, query

    fake_claude = _script(
        tmp_path / "fake-claude", f"import runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n"
    )
    # The SDK execs cli_path with its own flags: this one hands them all to the bridge (no shell).
    launcher = _script(
        tmp_path / "bridge-cli",
        f"import os, sys\nos.execv({AGENTRT!r}, [{AGENTRT!r}, 'bridge', '--to', 'stream-json', *sys.argv[1:]])\n",
    )
    env = {
        "CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK": "1",
        "AWP_AGENT_CLI_EXECUTABLE": fake_claude,
        "AWP_AGENT_CLI_PROTOCOL": "stream-json",
        "AWP_AGENT_CLI_ENV_JSON": '{"STREAM_JSON_FIXTURE_MODE": "permission", '
        f'"STREAM_JSON_FIXTURE_COMMAND": "{command}"}}',
        "HOME": str(tmp_path),
    }

    async def prompt() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "user", "message": {"role": "user", "content": "run it"}, "parent_tool_use_id": None}

    async def main() -> list[Any]:
        options = ClaudeAgentOptions(cli_path=launcher, can_use_tool=can_use_tool, env=env, cwd=str(tmp_path))
        return [m async for m in query(prompt=prompt(), options=options)]

    return asyncio.run(asyncio.wait_for(main(), BOUND))


def _result_text(messages: list[Any]) -> str:
    from claude_agent_sdk import ResultMessage

    (result,) = [m for m in messages if isinstance(m, ResultMessage)]
    return str(result.result)


def test_the_sdks_can_use_tool_callback_allows_the_hosted_agents_tool(tmp_path: Path) -> None:
    from claude_agent_sdk import PermissionResultAllow

    asked: list[tuple[str, dict[str, Any], Any]] = []

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append((name, tool_input, context.tool_use_id))
        return PermissionResultAllow()

    messages = _run_sdk(tmp_path, can_use_tool)
    assert asked == [("Bash", {"command": "echo hi"}, "toolu_1")]
    assert "allowed:echo hi" in _result_text(messages)


def test_a_rewritten_input_reaches_the_hosted_agent(tmp_path: Path) -> None:
    from claude_agent_sdk import PermissionResultAllow

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultAllow(updated_input={"command": "echo rewritten"})

    assert "allowed:echo rewritten" in _result_text(_run_sdk(tmp_path, can_use_tool))


def test_the_sdks_denial_reaches_the_hosted_agent_with_its_message(tmp_path: Path) -> None:
    from claude_agent_sdk import PermissionResultDeny

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultDeny(message="not on my machine")

    assert "denied:not on my machine" in _result_text(_run_sdk(tmp_path, can_use_tool))


def test_the_claude_agent_sdks_flags_are_accepted_and_a_system_prompt_is_refused() -> None:
    args = parse_bridge_args(
        ["--output-format", "stream-json", "--verbose", "--system-prompt", "", "--permission-prompt-tool",
         "stdio", "--setting-sources=user,project", "--include-partial-messages", "--input-format", "stream-json"]
    )  # fmt: skip
    assert args.permission_prompt_tool == "stdio" and args.partial_messages
    assert parse_bridge_args([]).permission_prompt_tool is None
    for bad in (["--system-prompt", "be terse"], ["--permission-prompt-tool", "mcp__x__approve"]):
        with pytest.raises(AgentrtError) as info:
            parse_bridge_args(bad)
        assert info.value.code == f"unsupported_argument:{bad[0]}"


def test_answers_of_every_shape() -> None:
    from agentrt_stream_json.codec import StreamJsonAgentCodec

    codec = StreamJsonAgentCodec()
    raw = {"request": {"tool_use_id": "toolu_9"}}

    def ask() -> str:
        rid, message = codec.permission_request(
            PermissionRequest(tool_name="Bash", input={"command": "ls"}, request_id="r", raw=raw)
        )
        assert message["type"] == "control_request" and message["request_id"] == rid
        assert message["request"]["subtype"] == "can_use_tool" and message["request"]["tool_use_id"] == "toolu_9"
        assert message["request"]["input"] == {"command": "ls"}
        return rid

    def answer(rid: str, response: dict[str, Any]) -> Any:
        got = codec.permission_answer({"type": "control_response", "response": {"request_id": rid, **response}})
        assert got is not None and got[0] == rid
        return got[1]

    rid = ask()
    same = answer(rid, {"subtype": "success", "response": {"behavior": "allow", "updatedInput": {"command": "ls"}}})
    assert same.allow and same.updated_input is None
    assert codec.permission_answer({"type": "control_response", "response": {"request_id": rid}}) is None  # once
    new = answer(ask(), {"subtype": "success", "response": {"behavior": "allow", "updatedInput": {"command": "pwd"}}})
    assert new.allow and new.updated_input == {"command": "pwd"}
    denied = answer(ask(), {"subtype": "success", "response": {"behavior": "deny", "message": "no"}})
    assert not denied.allow and denied.message == "no"
    failed = answer(ask(), {"subtype": "error", "error": "boom"})
    assert not failed.allow and "boom" in failed.message
    odd = answer(ask(), {"subtype": "success", "response": {"behavior": "maybe"}})
    assert not odd.allow
    # Not ours: someone else's response, another type, garbage.
    assert codec.permission_answer({"type": "control_response", "response": {"request_id": "other"}}) is None
    assert codec.permission_answer({"type": "user"}) is None
    assert codec.permission_answer([1, 2]) is None


def test_without_the_flag_the_bridge_does_not_ask(tmp_path: Path) -> None:
    """No ``--permission-prompt-tool stdio``: the hosted agent gets the default policy's answer."""
    import json
    import subprocess

    fake_claude = _script(
        tmp_path / "fake-claude", f"import runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AWP_AGENT_CLI_EXECUTABLE": fake_claude,
        "AWP_AGENT_CLI_PROTOCOL": "stream-json",
        "AWP_AGENT_CLI_ENV_JSON": '{"STREAM_JSON_FIXTURE_MODE": "permission"}',
    }
    user = {"type": "user", "message": {"role": "user", "content": "run it"}}
    proc = subprocess.run(
        [AGENTRT, "bridge", "--to", "stream-json"], input=json.dumps(user) + "\n", env=env,
        capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not [o for o in lines if o.get("type") == "control_request"]
    (result,) = [o for o in lines if o.get("type") == "result"]
    assert result["result"].startswith("denied:")
