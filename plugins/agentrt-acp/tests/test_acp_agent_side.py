"""ACP on the agent side: agentrt *is* the ACP agent.

``agentrt bridge --to acp`` driven by the real Python SDK client (its
``spawn_agent_process``), hosting the awp-jsonl example agent; ``agentrt agent
--dialect acp`` (the reference agent, a real OpenAI-compatible stream on
loopback) driven by agentrt's own ACP host side.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import TextDelta, TurnCompleted
from agentrt.permissions import deny_all
from agentrt.testing import ReplayResponse, serve_replay, write_fixture_agent
from agentrt_acp.codec import AcpDialect

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _text_round(*pieces: str, usage: tuple[int, int]) -> list[bytes]:
    """An OpenAI chat stream answering with ``pieces`` of text, then a usage chunk."""
    events: list[Any] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def test_bridge_to_acp_serves_the_python_sdk_client(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
    from acp.interfaces import Client

    class Recorder(Client):
        def __init__(self) -> None:
            self.updates: list[Any] = []

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            self.updates.append((session_id, update))

    async def main() -> None:
        client = Recorder()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
        # The suite's scratch XDG directories (tests/conftest.py): never the real database.
        env.update({k: v for k, v in os.environ.items() if k.startswith("XDG_")})
        env["AWP_AGENT_CLI_EXECUTABLE"] = write_fixture_agent(tmp_path)
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=env) as (conn, _proc):
            # wait_for: hang guards only.
            init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
            assert init.protocol_version == PROTOCOL_VERSION
            session = await asyncio.wait_for(conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 60)
            for words in ("hello there", "and again"):
                client.updates.clear()
                reply = await asyncio.wait_for(
                    conn.prompt(session_id=session.session_id, prompt=[text_block(words)]), 60
                )
                assert reply.stop_reason == "end_turn"
                assert reply.usage is not None and reply.usage.output_tokens > 0
                texts = [u.content.text for sid, u in client.updates if u.session_update == "agent_message_chunk"]
                assert "".join(texts).strip() == f"echo: {words}"
                assert {sid for sid, _ in client.updates} == {session.session_id}
            try:
                await asyncio.wait_for(conn.prompt(session_id="nope", prompt=[text_block("x")]), 60)
            except RequestError as exc:
                assert exc.code == -32602
            else:
                raise AssertionError("a prompt for an unknown session was accepted")

    asyncio.run(main())


async def test_reference_agent_speaks_acp(tmp_path: Path) -> None:
    async with serve_replay([ReplayResponse.sse(_text_round("Hi", " there", usage=(3, 2)))]) as server:
        env = {
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "AGENTRT_LOAD_PLUGINS": "openai,acp",
            "AGENTRT_MODEL": "test-model",
            "AGENTRT_STATE_DIR": str(tmp_path / "state"),
            "AGENTRT_API_BASE_URL": server.url + "/v1",
        }
        launch = LaunchSpec(
            executable=AGENTRT, prefix_args=("agent", "--dialect", "acp"), env_entries=env, protocol="acp"
        )
        parent = {k: os.environ[k] for k in ("PATH",) if k in os.environ}
        async with open_conversation(
            launch, dialect=AcpDialect(), permission_policy=deny_all, parent_env=parent
        ) as conv:
            events = []
            with trio.fail_after(60):
                stream = conv.send("hello")
                async for ev in stream:
                    events.append(ev)
            assert isinstance(stream.terminal, TurnCompleted)
            assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "Hi there"
            assert stream.terminal.usage is not None and stream.terminal.usage.output_tokens == 2
            assert conv.session_id is not None and stream.terminal.session_id == conv.session_id
