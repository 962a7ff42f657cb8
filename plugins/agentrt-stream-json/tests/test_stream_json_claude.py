"""The real Claude Code CLI (the native binary pinned in ``.peers/``) over stream-json, as agentrt starts it.

Claude Code talks to a loopback fake Anthropic API (:mod:`agentrt.testing.fake_apis`)
that asks for ``Bash`` with ``touch made.txt``.  agentrt starts the CLI with
``--permission-prompt-tool stdio`` and ``--include-partial-messages`` (as the
Agent SDK does), so its approval policy answers the CLI's ``can_use_tool``
request and the reply streams as deltas: through the library
(``open_conversation``) and through ``agentrt run`` with a config file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.approval import ApprovalPolicy, ApprovalPrompt, Ruleset
from agentrt.events import ControlRequest, TextDelta, ToolResult, TurnCompleted
from agentrt.testing.fake_apis import serve_fake_anthropic
from agentrt.testing.real_peers import CLAUDE_CODE, peer_path
from agentrt_stream_json.codec import StreamJsonDialect

CLAUDE = peer_path(CLAUDE_CODE)
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
BOUND = 120  # a hang guard only: the real CLI starts slowly on a busy machine
COMMAND = "touch made.txt"


def _claude() -> str:
    if not CLAUDE.is_file():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    return str(CLAUDE)


def _env(home: Path, url: str) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-test-not-a-secret",
        "HOME": str(home),
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return home, work


async def _one_turn(launch: LaunchSpec, work: Path, policy: Any) -> tuple[list[Any], Any]:
    parent = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    events: list[Any] = []
    async with open_conversation(
        launch, dialect=StreamJsonDialect(), permission_policy=policy, parent_env=parent, cwd=str(work), term_grace=5
    ) as conv:
        with trio.fail_after(BOUND):
            stream = conv.send("make the file")
            async for ev in stream:
                events.append(ev)
    return events, stream.terminal


def _launch(home: Path, url: str, **options: Any) -> LaunchSpec:
    return LaunchSpec(
        executable=_claude(), env_entries=_env(home, url), protocol="stream-json", model="claude-test", **options
    )


@pytest.mark.parametrize("allowed", [True, False])
async def test_the_policy_answers_claude_codes_permission_request(tmp_path: Path, allowed: bool) -> None:
    home, work = _dirs(tmp_path)
    decisions: list[Any] = []

    async def record(decision: Any) -> None:
        decisions.append(decision)

    rules = Ruleset.build(default_mode="deny", cli_allow=["Bash(touch:*)"] if allowed else [])
    policy = ApprovalPolicy(rules, recorder=record)
    with serve_fake_anthropic(tool_command=COMMAND) as api:
        events, result = await _one_turn(_launch(home, api.url), work, policy)
    assert isinstance(result, TurnCompleted), result
    (control,) = [ev for ev in events if isinstance(ev, ControlRequest)]
    assert control.subtype == "can_use_tool" and control.request["input"]["command"] == COMMAND
    (decision,) = decisions
    (tool_result,) = api.tool_results
    assert [ev for ev in events if isinstance(ev, ToolResult)]
    if allowed:
        assert (decision.decision, decision.by) == ("allow", "rule:--allow-tool Bash(touch:*)")
        assert (work / "made.txt").exists()
        assert not tool_result.get("is_error")
    else:
        assert (decision.decision, decision.by) == ("deny", "mode:deny (default)")
        assert not (work / "made.txt").exists()
        assert tool_result.get("is_error") is True
        assert tool_result["content"] == "agentrt: Bash(touch made.txt) denied (mode:deny (default))"


@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_mode_ask_asks_the_person_through_the_policy(tmp_path: Path, answer: str) -> None:
    home, work = _dirs(tmp_path)
    asked: list[ApprovalPrompt] = []

    async def asker(prompt: ApprovalPrompt) -> Any:
        asked.append(prompt)
        return answer

    policy = ApprovalPolicy(Ruleset.build(default_mode="ask"), asker=asker)
    with serve_fake_anthropic(tool_command=COMMAND) as api:
        _, result = await _one_turn(_launch(home, api.url), work, policy)
    assert isinstance(result, TurnCompleted), result
    (prompt,) = asked
    assert prompt.tool_name == "Bash" and COMMAND in prompt.summary
    assert (work / "made.txt").exists() is (answer == "allow")


@pytest.mark.parametrize("partial", [True, False])
async def test_the_reply_streams_as_deltas_unless_turned_off(tmp_path: Path, partial: bool) -> None:
    home, work = _dirs(tmp_path)
    reply = "one two three four five six seven eight nine ten"
    policy = ApprovalPolicy(Ruleset.build(default_mode="deny"))
    with serve_fake_anthropic(reply, chunk=4) as api:
        events, result = await _one_turn(_launch(home, api.url, partial_messages=partial), work, policy)
    assert isinstance(result, TurnCompleted), result
    deltas = [ev for ev in events if isinstance(ev, TextDelta)]
    assert "".join(ev.text for ev in deltas) == reply
    if partial:
        # One event per SSE delta the API sent, each before the turn's end.
        assert [ev.text for ev in deltas] == [reply[i : i + 4] for i in range(0, len(reply), 4)]
    else:
        assert [ev.text for ev in deltas] == [reply]  # the whole block, from the complete message
    terminals = [i for i, ev in enumerate(events) if isinstance(ev, TurnCompleted)]
    assert all(events.index(ev) < i for ev in deltas for i in terminals)


async def test_deltas_arrive_while_the_api_is_still_sending_the_reply(tmp_path: Path) -> None:
    """The fake API sends three deltas, then holds the rest until the test has seen them as events."""
    home, work = _dirs(tmp_path)
    reply = "one two three four five six seven eight nine ten"
    pieces = [reply[i : i + 4] for i in range(0, len(reply), 4)]
    seen: list[tuple[str, bool]] = []  # (text, was the API still holding the rest back)
    parent = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    policy = ApprovalPolicy(Ruleset.build(default_mode="deny"))
    with serve_fake_anthropic(reply, chunk=4, hold_after=3) as api:
        try:
            async with open_conversation(
                _launch(home, api.url), dialect=StreamJsonDialect(), permission_policy=policy, parent_env=parent,
                cwd=str(work), term_grace=5,
            ) as conv:
                with trio.fail_after(BOUND):
                    stream = conv.send("hello")
                    async for ev in stream:
                        if isinstance(ev, TextDelta):
                            seen.append((ev.text, api.holding.is_set()))
                            if len(seen) == 3:
                                api.release.set()
        finally:
            api.release.set()
    assert isinstance(stream.terminal, TurnCompleted), stream.terminal
    assert [text for text, _ in seen] == pieces
    assert [held for _, held in seen[:3]] == [True, True, True]


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp / "home"), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/logs.db",
    }
    return subprocess.run([AGENTRT, *args], env=env, capture_output=True, text=True, timeout=BOUND,
                          stdin=subprocess.DEVNULL, cwd=tmp / "work")


@pytest.mark.parametrize("allowed", [True, False])
def test_agentrt_run_with_a_configured_claude_code(tmp_path: Path, allowed: bool) -> None:
    home, work = _dirs(tmp_path)
    with serve_fake_anthropic(tool_command=COMMAND) as api:
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in _env(home, api.url).items())
        (tmp_path / "config.toml").write_text(
            f'[agents.claude]\nexecutable = "{_claude()}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
            f"env = {{ {env} }}\n"
        )
        rules = ["--allow-tool", "Bash(touch:*)"] if allowed else []
        proc = _cli(tmp_path, "run", "-a", "claude", "--json", *rules, "make the file")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["type"] for e in events].count("turn_completed") == 1
    assert (work / "made.txt").exists() is allowed
    logs = _cli(tmp_path, "logs", "--approvals", "--json", "-n", "0")
    assert logs.returncode == 0, logs.stderr
    [row] = [json.loads(line) for line in logs.stdout.splitlines()]
    by = "rule:--allow-tool Bash(touch:*)" if allowed else "mode:deny (default)"
    assert (row["tool"], row["decision"], row["by"], row["agent"]) == (
        "Bash", "allow" if allowed else "deny", by, "claude")
    assert COMMAND in row["summary"]


def test_launch_args_add_the_sdk_flags_unless_the_users_args_set_them() -> None:
    from agentrt_stream_json.codec import COMPAT_ARGS

    dialect = StreamJsonDialect()
    both = ("--permission-prompt-tool", "stdio", "--include-partial-messages")
    assert dialect.launch_args(()) == (*COMPAT_ARGS, *both)
    assert dialect.launch_args((), partial_messages=False) == (*COMPAT_ARGS, "--permission-prompt-tool", "stdio")
    assert dialect.launch_args(("--permission-prompt-tool", "mcp__auth__ok")) == (
        *COMPAT_ARGS, "--include-partial-messages")
    assert dialect.launch_args(("--permission-prompt-tool=stdio", "--include-partial-messages")) == COMPAT_ARGS
    launch = LaunchSpec(executable="/bin/true", prefix_args=("--x",), protocol="stream-json", model="m")
    argv = launch.process_spec(dialect, parent_env={}).argv
    assert argv == ("/bin/true", "--x", *COMPAT_ARGS, *both, "--model", "m")


@pytest.mark.parametrize("kind", ["allow_once", "reject_once"])
def test_an_acp_client_of_the_bridge_is_asked_and_the_reply_streams(tmp_path: Path, kind: str) -> None:
    """``agentrt bridge --to acp`` hosting the real Claude Code: its permission question reaches the ACP client."""
    import asyncio

    from acp import PROTOCOL_VERSION, spawn_agent_process
    from acp.interfaces import Client
    from acp.schema import AllowedOutcome, RequestPermissionResponse

    home, work = _dirs(tmp_path)
    asked: list[Any] = []
    chunks: list[str] = []

    class Asked(Client):
        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            if update.session_update == "agent_message_chunk":
                chunks.append(update.content.text)

        async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
            asked.append(tool_call)
            option = next(o for o in options if o.kind == kind)
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    async def main(url: str) -> Any:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "AWP_AGENT_CLI_EXECUTABLE": _claude(), "AWP_AGENT_CLI_PROTOCOL": "stream-json",
               "AWP_AGENT_DEFAULT_MODEL": "claude-test", "AWP_AGENT_CLI_ENV_JSON": json.dumps(_env(home, url))}
        async with spawn_agent_process(Asked(), AGENTRT, "bridge", "--to", "acp", env=env, cwd=str(work)) as (
            conn, _proc,
        ):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), BOUND)
            prompt = [{"type": "text", "text": "make the file"}]
            return await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=prompt), BOUND)

    with serve_fake_anthropic(tool_command=COMMAND, chunk=5) as api:
        response = asyncio.run(main(api.url))
    assert response.stop_reason == "end_turn"
    (tool_call,) = asked
    assert "touch made.txt" in json.dumps(tool_call.model_dump(mode="json"))
    assert (work / "made.txt").exists() is (kind == "allow_once")
    (tool_result,) = api.tool_results
    assert bool(tool_result.get("is_error")) is (kind == "reject_once")
    assert len(chunks) > 2 and "".join(chunks).startswith("The tool said: ")
