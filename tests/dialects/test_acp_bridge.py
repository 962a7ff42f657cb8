"""``agentrt bridge --to acp`` while a turn runs: cancels and permission requests.

The real Python SDK client (``agent-client-protocol``) drives the bridge, which
hosts the stream-json fixture agent (``agentrt_stream_json.fixture_agent``) over real
pipes: its ``can_use_tool`` requests reach the client as
``session/request_permission``, the client's choice goes back to it, and a
``session/cancel`` sent mid-turn interrupts it.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ..plugin_data import STREAM_JSON_AGENT

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = STREAM_JSON_AGENT
BOUND = 60  # hang guard only


def _fake_claude(tmp_path: Path) -> str:
    # The launch contract wants a regular, non-symlink executable: a script naming the interpreter.
    path = tmp_path / "fake-claude"
    path.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    path.chmod(stat.S_IRWXU)
    return str(path)


Choose = Callable[[Any, list[Any]], Awaitable[Any]]


def _drive(tmp_path: Path, mode: str, choose: Choose, script: Callable[[Any, Any, Any], Awaitable[None]]) -> None:
    """Spawn the bridge hosting the fixture in ``mode`` and run ``script(conn, session_id, client)``."""
    from acp import PROTOCOL_VERSION, spawn_agent_process
    from acp.interfaces import Client

    class Recorder(Client):
        def __init__(self) -> None:
            self.updates: list[Any] = []
            self.asked: list[Any] = []
            self.texted = asyncio.Event()  # set on each agent_message_chunk

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            self.updates.append((session_id, update))
            if update.session_update == "agent_message_chunk":
                self.texted.set()

        async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
            self.asked.append((session_id, tool_call, options))
            return await choose(tool_call, options)

    async def main() -> None:
        client = Recorder()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
        env["AWP_AGENT_CLI_EXECUTABLE"] = _fake_claude(tmp_path)
        env["AWP_AGENT_CLI_PROTOCOL"] = "stream-json"
        env["AWP_AGENT_CLI_ENV_JSON"] = json.dumps({"STREAM_JSON_FIXTURE_MODE": mode})
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env) as (conn, _proc):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), BOUND)
            await asyncio.wait_for(script(conn, session.session_id, client), BOUND)

    asyncio.run(main())


def _by_kind(options: list[Any], kind: str) -> Any:
    from acp.schema import AllowedOutcome, RequestPermissionResponse

    option = next(o for o in options if o.kind == kind)
    return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))


def _texts(client: Any) -> str:
    return "".join(u.content.text for _, u in client.updates if u.session_update == "agent_message_chunk")


def _tool_updates(client: Any) -> list[Any]:
    return [u for _, u in client.updates if u.session_update == "tool_call_update"]


@pytest.mark.parametrize("kind", ["allow_once", "allow_always"])
def test_allowed_tool_runs_and_its_result_reaches_the_client(tmp_path: Path, kind: str) -> None:
    from acp import text_block

    async def choose(tool_call: Any, options: list[Any]) -> Any:
        return _by_kind(options, kind)

    async def script(conn: Any, sid: str, client: Any) -> None:
        for _turn in (1, 2):
            client.updates.clear()
            reply = await conn.prompt(session_id=sid, prompt=[text_block("run echo hi")])
            assert reply.stop_reason == "end_turn"
            assert _texts(client) == "allowed:echo hi"
            (done,) = _tool_updates(client)
            assert done.tool_call_id == "toolu_1" and done.status == "completed"
            assert "hi" in json.dumps(done.raw_output)
        # allow_always covers the second request: the client is asked once.
        assert len(client.asked) == (2 if kind == "allow_once" else 1)
        sid_asked, tool_call, options = client.asked[0]
        assert sid_asked == sid
        assert tool_call.tool_call_id == "toolu_1" and tool_call.raw_input == {"command": "echo hi"}
        assert tool_call.title == "Running: echo hi"
        assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once"}

    _drive(tmp_path, "permission", choose, script)


def test_rejected_tool_is_denied(tmp_path: Path) -> None:
    from acp import text_block

    async def choose(tool_call: Any, options: list[Any]) -> Any:
        return _by_kind(options, "reject_once")

    async def script(conn: Any, sid: str, client: Any) -> None:
        reply = await conn.prompt(session_id=sid, prompt=[text_block("run echo hi")])
        assert reply.stop_reason == "end_turn"
        assert _texts(client) == "denied:rejected by the ACP client"
        (done,) = _tool_updates(client)
        assert done.status == "failed"
        assert len(client.asked) == 1

    _drive(tmp_path, "permission", choose, script)


def test_cancel_mid_turn_ends_the_prompt_cancelled(tmp_path: Path) -> None:
    from acp import text_block

    async def choose(tool_call: Any, options: list[Any]) -> Any:
        raise AssertionError("the stall fixture asks for nothing")

    async def script(conn: Any, sid: str, client: Any) -> None:
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("take your time")]))
        # The turn is running once its text arrived; the fixture then waits for an interrupt.
        await client.texted.wait()
        assert _texts(client) == "working" and not prompt.done()
        await conn.cancel(session_id=sid)
        reply = await prompt
        assert reply.stop_reason == "cancelled"
        # The session goes on: the next prompt runs (and is cancelled the same way).
        client.updates.clear()
        client.texted.clear()
        again = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("again")]))
        await client.texted.wait()
        await conn.cancel(session_id=sid)
        assert (await again).stop_reason == "cancelled"

    _drive(tmp_path, "stall", choose, script)


def test_cancel_while_the_client_is_asked(tmp_path: Path) -> None:
    from acp import text_block
    from acp.schema import DeniedOutcome, RequestPermissionResponse

    asked = asyncio.Event()
    release = asyncio.Event()

    async def choose(tool_call: Any, options: list[Any]) -> Any:
        asked.set()
        await release.wait()  # a client answers open requests `cancelled` after it cancels
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def script(conn: Any, sid: str, client: Any) -> None:
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run echo hi")]))
        await asked.wait()
        await conn.cancel(session_id=sid)
        reply = await prompt
        release.set()
        assert reply.stop_reason == "cancelled"
        assert "allowed" not in _texts(client)

    _drive(tmp_path, "permission", choose, script)


def test_permission_answers_of_every_shape() -> None:
    from agentrt.dialect import Interrupt, Turn
    from agentrt.events import TurnCompleted
    from agentrt.permissions import PermissionRequest
    from agentrt_acp.codec import AcpAgentCodec

    codec = AcpAgentCodec()
    codec.decode_input({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}})
    (new,) = codec.drain_output()
    sid = new["result"]["sessionId"]
    request = PermissionRequest(tool_name="Bash", input={"command": "ls"}, request_id="perm_1")
    acp_raw = {"jsonrpc": "2.0", "id": 7, "params": {"toolCall": {"toolCallId": "call_9"}}}
    odd = PermissionRequest(tool_name="mystery", input={}, request_id="perm_2", raw=acp_raw)
    (_, message) = codec.permission_request(odd)  # type: ignore[misc]
    assert message["params"]["toolCall"]["toolCallId"] == "call_9"  # an ACP agent's own id, kept
    assert message["params"]["toolCall"]["title"] == "mystery"

    def ask() -> str:
        asked = codec.permission_request(request)
        assert isinstance(asked, tuple)
        rid, message = asked
        assert message["params"]["sessionId"] == sid and message["params"]["toolCall"]["toolCallId"] == "perm_1"
        return rid

    def answer(rid: str, body: dict[str, Any]) -> Any:
        got = codec.permission_answer({"jsonrpc": "2.0", "id": rid, **body})
        assert got is not None and got[0] == rid
        return got[1]

    rid = ask()
    assert codec.permission_answer({"jsonrpc": "2.0", "id": "other", "result": {}}) is None
    assert codec.permission_answer({"jsonrpc": "2.0", "id": rid, "method": "x"}) is None
    denied = answer(rid, {"error": {"code": -32603, "message": "boom"}})
    assert not denied.allow and "boom" in denied.message
    assert codec.permission_answer({"jsonrpc": "2.0", "id": rid, "result": {}}) is None  # answered once
    assert not answer(ask(), {"result": {"outcome": {"outcome": "cancelled"}}}).allow
    assert not answer(ask(), {"result": {"outcome": {"outcome": "selected", "optionId": "theirs"}}}).allow
    assert not answer(ask(), {"result": "nonsense"}).allow
    assert answer(ask(), {"result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}).allow
    assert answer(ask(), {"result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}}}).allow
    assert codec.permission_request(request).allow  # type: ignore[union-attr]

    # A cancel with no running prompt is ignored; a cancelled prompt is answered `cancelled`.
    assert codec.decode_input({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}) is None
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    assert isinstance(
        codec.decode_input({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}), Turn
    )
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    assert isinstance(codec.decode_input(cancel), Interrupt)
    (reply,) = codec.encode(TurnCompleted(session_id="x"))
    assert reply == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}


async def test_client_gone_mid_turn_cancels_it_and_the_bridge_exits(tmp_path: Path) -> None:
    """stdin closed while the hosted CLI waits (the stall fixture): the turn is cancelled, everything exits."""
    import trio

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    env["AWP_AGENT_CLI_EXECUTABLE"] = _fake_claude(tmp_path)
    env["AWP_AGENT_CLI_PROTOCOL"] = "stream-json"
    env["AWP_AGENT_CLI_ENV_JSON"] = json.dumps({"STREAM_JSON_FIXTURE_MODE": "stall"})
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
    ]
    with trio.fail_after(BOUND):  # hang guard only
        proc = await trio.lowlevel.open_process(
            [AGENTRT, "bridge", "--to", "acp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            buffer, seen = b"", []
            while not any(
                m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk" for m in seen
            ):
                chunk = await proc.stdout.receive_some()
                assert chunk, "the bridge ended its output early"
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                seen.extend(json.loads(line) for line in done if line)
                if any(m.get("id") == 1 for m in seen) and not any(m.get("id") == 2 for m in lines):
                    sid = next(m["result"]["sessionId"] for m in seen if m.get("id") == 1)
                    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
                    lines.append({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
                    await proc.stdin.send_all(json.dumps(lines[-1]).encode() + b"\n")
            await proc.stdin.aclose()  # the client is gone mid-turn
            rest = b""
            while chunk := await proc.stdout.receive_some():
                rest += chunk
            assert await proc.wait() == 0
        finally:
            if proc.returncode is None:  # a failed assertion or the hang guard: do not leave it running
                proc.kill()
                with trio.CancelScope(shield=True):
                    await proc.wait()
    answers = [json.loads(line) for line in (buffer + rest).split(b"\n") if line.strip()]
    assert {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}} in answers


def test_a_burst_of_cancels_ends_its_own_prompt_only(tmp_path: Path) -> None:
    """1,000 ``session/cancel`` for one prompt are one cancel: the next prompt runs to its end.

    Each cancel once started its own task, whose interrupt could reach the hosted CLI
    after the next prompt's turn had begun and end that turn instead.
    """
    from acp import text_block
    from acp.schema import DeniedOutcome, RequestPermissionResponse

    state: dict[str, Any] = {"burst": True}
    burst_sent = asyncio.Event()

    async def choose(tool_call: Any, options: list[Any]) -> Any:
        if state.pop("burst", False):
            for _ in range(1000):
                await state["conn"].cancel(session_id=state["sid"])
            burst_sent.set()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return _by_kind(options, "allow_once")

    async def script(conn: Any, sid: str, client: Any) -> None:
        state["conn"], state["sid"] = conn, sid
        first = await conn.prompt(session_id=sid, prompt=[text_block("run echo hi")])
        assert first.stop_reason == "cancelled"
        # The whole burst precedes the next prompt on the wire (the SDK answers the first
        # prompt while the permission callback may still be sending).
        await burst_sent.wait()
        for _ in range(3):  # later prompts are not touched by the burst's leftovers
            client.updates.clear()
            reply = await conn.prompt(session_id=sid, prompt=[text_block("run echo hi")])
            assert reply.stop_reason == "end_turn", reply
            assert _texts(client) == "allowed:echo hi"
        assert len(client.asked) == 4

    _drive(tmp_path, "permission", choose, script)


def test_a_new_session_after_turns_gets_a_fresh_conversation(tmp_path: Path) -> None:
    """Each client session is its own conversation of the hosted CLI, recorded under its own thread."""
    from acp import text_block

    async def choose(tool_call: Any, options: list[Any]) -> Any:
        return _by_kind(options, "allow_once")

    sessions: list[str] = []

    async def script(conn: Any, sid: str, client: Any) -> None:
        assert (await conn.prompt(session_id=sid, prompt=[text_block("first")])).stop_reason == "end_turn"
        other = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        assert (await conn.prompt(session_id=other.session_id, prompt=[text_block("second")])).stop_reason == "end_turn"
        sessions.extend([sid, other.session_id])

    _drive(tmp_path, "permission", choose, script)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    out = subprocess.run(
        [AGENTRT, "logs", "--json"], env=env, capture_output=True, text=True, timeout=BOUND, check=True
    )
    rows = {r["prompt"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert rows["first"]["thread"] == f"acp-{sessions[0]}" and rows["second"]["thread"] == f"acp-{sessions[1]}"
    assert rows["first"]["conversation_id"] != rows["second"]["conversation_id"]
