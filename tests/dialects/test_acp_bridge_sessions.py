"""``agentrt bridge --to acp`` hosting the real Claude Code CLI: agent info, tool kinds, logs, ``session/load``.

The Python SDK's client (``agent-client-protocol``) drives the bridge, which
hosts Claude Code (``.peers/``) over stream-json against the loopback fake
Anthropic API.  The bridge reports who it is, advertises ``loadSession``,
runs Claude Code in the session's ``cwd`` (its tools act there, not in the
bridge's own directory), gives ``Bash`` the kind ``execute``, records its turns in the database
(``agentrt logs``), and a second bridge process loads the first one's session:
the hosted CLI resumes its own session (the fake API sees the earlier
exchange) while the client keeps its session id.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrt.testing.fake_apis import serve_fake_anthropic

CLAUDE = Path(__file__).resolve().parents[2] / ".peers" / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64"
CLAUDE = CLAUDE / "claude"
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
BOUND = 120  # hang guard only: the real CLI starts slowly on a busy machine


def _claude() -> str:
    if not CLAUDE.is_file():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    return str(CLAUDE)


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    inner = {
        "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-test-not-a-secret", "HOME": str(home),
        "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }  # fmt: skip
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),  # the bridge's own: its database and config live here
        "AGENTRT_CONFIG": str(tmp_path / "none.toml"),
        "AWP_AGENT_CLI_EXECUTABLE": _claude(),
        "AWP_AGENT_CLI_PROTOCOL": "stream-json",
        "AWP_AGENT_DEFAULT_MODEL": "claude-test",
        "AWP_AGENT_CLI_ENV_JSON": json.dumps(inner),
    }


class _Recorder:
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.updates: list[Any] = []
        self.asked: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        self.asked.append(tool_call)
        kind = "allow_once" if self.allow else "reject_once"
        option = next(o for o in options if o.kind == kind)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    def text(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


def _client(allow: bool = True) -> Any:
    from acp.interfaces import Client

    class Recorder(_Recorder, Client):
        pass

    return Recorder(allow)


def test_agent_info_tool_kinds_and_logs(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    work, elsewhere = tmp_path / "work", tmp_path / "bridge"
    work.mkdir()
    elsewhere.mkdir()

    async def main(env: dict[str, str]) -> tuple[Any, Any, str]:
        client = _client(allow=True)
        # The bridge runs elsewhere: the session's cwd is where Claude Code runs and its tools act.
        spawned = spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env, cwd=str(elsewhere))
        async with spawned as (conn, _proc):
            init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), BOUND)
            reply = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("make the file")]), BOUND
            )
            assert reply.stop_reason == "end_turn"
        return init, client, session.session_id

    with serve_fake_anthropic(tool_command="touch made.txt") as api:
        env = _env(tmp_path, api.url)
        init, client, sid = asyncio.run(main(env))
    assert init.agent_info is not None and init.agent_info.name == "agentrt" and init.agent_info.version
    assert init.agent_capabilities.load_session is True
    assert len(client.asked) == 1, (client.asked, [u.session_update for u in client.updates], api.requests[-1:])
    assert client.asked[0].kind == "execute"  # Claude Code's Bash
    calls = [u for u in client.updates if u.session_update == "tool_call"]
    assert calls and {c.kind for c in calls} == {"execute"}
    assert api.tool_results
    assert (work / "made.txt").is_file()
    assert list(elsewhere.iterdir()) == []
    # The turn is in the database, under the client session's thread.
    logs = subprocess.run(
        [AGENTRT, "logs", "--json"], env=env, capture_output=True, text=True, timeout=BOUND, check=True
    ).stdout
    rows = [json.loads(line) for line in logs.splitlines() if line.strip()]
    assert any(r.get("prompt") == "make the file" for r in rows), rows
    assert any(r.get("thread") == f"acp-{sid}" for r in rows), rows


def test_session_load_resumes_the_hosted_cli_in_a_new_bridge(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    work = tmp_path / "work"
    work.mkdir()

    async def first(env: dict[str, str]) -> str:
        client = _client()
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env) as (conn, _proc):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), BOUND)
            prompt = [text_block("remember the word kumquat")]
            reply = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=prompt), BOUND)
            assert reply.stop_reason == "end_turn"
            return str(session.session_id)

    async def second(env: dict[str, str], sid: str) -> Any:
        client = _client()
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env) as (conn, _proc):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            await asyncio.wait_for(conn.load_session(cwd=str(work), mcp_servers=[], session_id=sid), BOUND)
            reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("which word?")]), BOUND)
            assert reply.stop_reason == "end_turn"
        return client

    with serve_fake_anthropic("Noted.") as api:
        env = _env(tmp_path, api.url)
        sid = asyncio.run(first(env))
        before = len(api.requests)
        client = asyncio.run(second(env, sid))
        resumed = api.requests[before:]
    # The load replayed the first exchange (the prompt, then its reply), then the new turn's reply came.
    users = [u.content.text for u in client.updates if u.session_update == "user_message_chunk"]
    assert users == ["remember the word kumquat"]
    assert client.text() == "Noted.Noted."
    # Claude Code resumed its own session: the request after the load carries the first exchange.
    assert any("kumquat" in json.dumps(r.get("messages")) for r in resumed), resumed


def test_set_model_restarts_the_hosted_cli_with_it_and_keeps_the_session(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    work = tmp_path / "work"
    work.mkdir()

    async def main(env: dict[str, str]) -> Any:
        client = _client()
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env) as (conn, _proc):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), BOUND)
            sid = session.session_id
            prompt = [text_block("remember the word kumquat")]
            assert (await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), BOUND)).stop_reason == "end_turn"
            changed = await asyncio.wait_for(
                conn.set_config_option(config_id="model", session_id=sid, value="sonnet"), BOUND
            )
            assert changed.config_options[0].current_value == "sonnet"
            prompt = [text_block("which word?")]
            assert (await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), BOUND)).stop_reason == "end_turn"
        return session

    with serve_fake_anthropic("Noted.") as api:
        session = asyncio.run(main(_env(tmp_path, api.url)))
        requests = list(api.requests)
    (option,) = session.config_options or ()
    assert (option.id, option.category, option.current_value) == ("model", "model", "claude-test")
    assert [o.value for o in option.options] == ["claude-test", "sonnet", "opus", "haiku"]
    first, last = requests[0], requests[-1]
    assert first["model"] == "claude-test"
    assert last["model"] != "claude-test" and "sonnet" in last["model"], last["model"]
    assert "kumquat" in json.dumps(last["messages"])  # the same session, resumed under the new model


def test_plan_mode_restarts_the_hosted_cli_in_it_and_keeps_the_session(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    work = tmp_path / "work"
    work.mkdir()

    async def main(env: dict[str, str]) -> tuple[Any, Any]:
        client = _client()
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env) as (conn, _proc):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), BOUND)
            sid = session.session_id
            prompt = [text_block("remember the word kumquat")]
            assert (await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), BOUND)).stop_reason == "end_turn"
            await asyncio.wait_for(conn.set_session_mode(session_id=sid, mode_id="plan"), BOUND)
            prompt = [text_block("which word?")]
            assert (await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), BOUND)).stop_reason == "end_turn"
        return session, client

    with serve_fake_anthropic("Noted.") as api:
        session, client = asyncio.run(main(_env(tmp_path, api.url)))
        requests = list(api.requests)
    modes = session.modes
    assert modes is not None and modes.current_mode_id == "default"
    assert [m.id for m in modes.available_modes] == ["default", "plan"]  # never a mode that skips approval
    assert [u.current_mode_id for u in client.updates if u.session_update == "current_mode_update"] == ["plan"]
    # Claude Code runs in plan mode: it tells the model so (and did not before).
    assert "Plan mode is active" not in json.dumps(requests[0]) and "Plan mode is active" in json.dumps(requests[-1])
    assert "kumquat" in json.dumps(requests[-1]["messages"])
