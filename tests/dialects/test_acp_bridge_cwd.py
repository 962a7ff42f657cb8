"""The bridge runs the hosted CLI in the client session's ``cwd`` (``session/new``, ``session/load``).

The real Python SDK client (``agent-client-protocol``) drives ``agentrt bridge
--to acp`` started in a directory of its own; the hosted CLI is the stream-json
fixture agent (``agentrt_stream_json.fixture_agent``, mode ``cwd``), whose every reply
says the directory it runs in and the session it resumed.  Without client
sessions (``--to stream-json``) the hosted CLI runs in the bridge's directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..plugin_data import STREAM_JSON_AGENT

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = STREAM_JSON_AGENT
BOUND = 60  # hang guard only


def _env(tmp_path: Path) -> dict[str, str]:
    # The launch contract wants a regular, non-symlink executable: a script naming the interpreter.
    exe = tmp_path / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AWP_AGENT_CLI_EXECUTABLE": str(exe),
        "AWP_AGENT_CLI_PROTOCOL": "stream-json",
        "AWP_AGENT_CLI_ENV_JSON": json.dumps({"STREAM_JSON_FIXTURE_MODE": "cwd"}),
    }


def _dirs(tmp_path: Path, *names: str) -> list[Path]:
    out = [tmp_path / name for name in names]
    for path in out:
        path.mkdir()
    return out


class _Client:
    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = {}

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk":
            self.texts.setdefault(session_id, []).append(update.content.text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the fixture asks for no permission")


def _client() -> Any:
    from acp.interfaces import Client

    class Recorder(_Client, Client):
        pass

    return Recorder()


async def _where(conn: Any, client: Any, sid: str) -> dict[str, Any]:
    """One prompt in session ``sid``: the hosted CLI's reply (its cwd and the session it resumed)."""
    from acp import text_block

    client.texts[sid] = []
    reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("where?")]), BOUND)
    assert reply.stop_reason == "end_turn"
    answer: dict[str, Any] = json.loads("".join(client.texts[sid]))
    return answer


def test_new_and_loaded_sessions_run_the_hosted_cli_in_their_cwd(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, spawn_agent_process

    bridge_dir, first, second, third = _dirs(tmp_path, "bridge", "first", "second", "third")

    async def main() -> list[dict[str, Any]]:
        client = _client()
        async with spawn_agent_process(
            client, AGENTRT, "bridge", "--to", "acp", env=_env(tmp_path), cwd=str(bridge_dir)
        ) as (conn, _proc):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            # Before any turn: the conversation opened at start moves to the session's cwd.
            a = (await asyncio.wait_for(conn.new_session(cwd=str(first), mcp_servers=[]), BOUND)).session_id
            seen = [await _where(conn, client, a), await _where(conn, client, a)]
            # After turns: a fresh conversation, in the new session's cwd.
            b = (await asyncio.wait_for(conn.new_session(cwd=str(second), mcp_servers=[]), BOUND)).session_id
            seen.append(await _where(conn, client, b))
            # A load resumes the hosted CLI's session, in the cwd the load names.
            await asyncio.wait_for(conn.load_session(cwd=str(third), mcp_servers=[], session_id=a), BOUND)
            seen.append(await _where(conn, client, a))
            # A new session in the loaded one's cwd, after its turns: a fresh conversation there.
            c = (await asyncio.wait_for(conn.new_session(cwd=str(third), mcp_servers=[]), BOUND)).session_id
            seen.append(await _where(conn, client, c))
        return seen

    seen = asyncio.run(main())
    assert seen == [
        {"cwd": str(first), "resume": None},
        {"cwd": str(first), "resume": None},
        {"cwd": str(second), "resume": None},
        {"cwd": str(third), "resume": "fixture-cwd-session"},
        {"cwd": str(third), "resume": None},
    ]
    assert list(bridge_dir.iterdir()) == []


def test_a_cwd_that_is_no_absolute_directory_is_refused(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, spawn_agent_process
    from acp.exceptions import RequestError

    (good,) = _dirs(tmp_path, "good")
    (tmp_path / "file").write_text("not a directory\n")
    bad: list[Any] = ["relative/dir", "", str(tmp_path / "missing"), str(tmp_path / "file"), "/" + "a" * 5000, 7, None]

    async def main() -> tuple[list[Any], dict[str, Any]]:
        client = _client()
        refused: list[Any] = []
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", env=_env(tmp_path)) as (conn, _p):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            for method in ("new", "load"):
                for cwd in bad:
                    params: dict[str, Any] = {"mcpServers": []}
                    if cwd is not None:
                        params["cwd"] = cwd
                    if method == "load":
                        params["sessionId"] = "some-session"
                    # Raw requests (the connection under the SDK's typed calls, which would refuse some of these).
                    try:
                        await asyncio.wait_for(conn._conn.send_request(f"session/{method}", params), BOUND)
                    except RequestError as exc:
                        refused.append((exc.code, exc.data))
                    else:
                        refused.append((method, cwd))
            # The bridge goes on: a good session works.
            sid = (await asyncio.wait_for(conn.new_session(cwd=str(good), mcp_servers=[]), BOUND)).session_id
            return refused, await _where(conn, client, sid)

    refused, where = asyncio.run(main())
    assert refused == [(-32602, {"code": "invalid_session_cwd"})] * (2 * len(bad))
    assert where["cwd"] == str(good)


def test_without_client_sessions_the_hosted_cli_runs_in_the_bridges_cwd(tmp_path: Path) -> None:
    (bridge_dir,) = _dirs(tmp_path, "bridge")
    line = {"type": "user", "message": {"role": "user", "content": "where?"}}
    out = subprocess.run(
        [AGENTRT, "bridge", "--to", "stream-json"], input=json.dumps(line) + "\n", env=_env(tmp_path),
        cwd=str(bridge_dir), capture_output=True, text=True, timeout=BOUND, check=True,
    )  # fmt: skip
    results = [o for o in map(json.loads, out.stdout.splitlines()) if o.get("type") == "result"]
    assert len(results) == 1, out.stdout
    assert json.loads(results[0]["result"]) == {"cwd": str(bridge_dir), "resume": None}
