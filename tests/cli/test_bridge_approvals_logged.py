"""``agentrt bridge --to acp`` records its approval decisions as ``run`` does (``agentrt logs --approvals``).

Real parts: the bridge is a real subprocess driven by the ACP Python SDK's
client (``agent-client-protocol``); it hosts the stream-json fixture agent
(``agentrt_stream_json.fixture_agent``, mode ``permission``: it asks
``can_use_tool`` for ``Bash {command: echo hi}`` and says what it got) named
in a real config file; the decisions land in the real SQLite database, read
back with ``agentrt logs --approvals --json``.
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

import pytest

from ..plugin_data import STREAM_JSON_AGENT

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = STREAM_JSON_AGENT
BOUND = 60  # hang guard only


def _env(tmp_path: Path, permissions: str | None) -> dict[str, str]:
    exe = tmp_path / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[agents.fx]\nexecutable = "{exe}"\nprotocol = "stream-json"\n'
        'env = { STREAM_JSON_FIXTURE_MODE = "permission" }\n'
        + (f"permissions = {permissions}\n" if permissions else "")
    )
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "AGENTRT_CONFIG": str(config)}


def _client(kind: str) -> Any:
    from acp.interfaces import Client
    from acp.schema import AllowedOutcome, RequestPermissionResponse

    class Answers(Client):
        def __init__(self) -> None:
            self.asked: list[Any] = []
            self.text = ""

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            if update.session_update == "agent_message_chunk":
                self.text += update.content.text

        async def request_permission(
            self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
        ) -> Any:
            self.asked.append(tool_call)
            option = next(o for o in options if o.kind == kind)
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    return Answers()


def _one_turn(env: dict[str, str], kind: str, turns: int = 1) -> tuple[Any, str]:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    async def main() -> tuple[Any, str]:
        client = _client(kind)
        async with spawn_agent_process(client, AGENTRT, "bridge", "--to", "acp", "-a", "fx", env=env) as (conn, _):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), BOUND)
            session = await asyncio.wait_for(conn.new_session(cwd=env["HOME"], mcp_servers=[]), BOUND)
            for _ in range(turns):
                prompt = conn.prompt(session_id=session.session_id, prompt=[text_block("run it")])
                await asyncio.wait_for(prompt, BOUND)
        return client, session.session_id

    return asyncio.run(main())


def _approvals(env: dict[str, str]) -> list[dict[str, Any]]:
    out = subprocess.run(
        [AGENTRT, "logs", "--approvals", "--json"], env=env, capture_output=True, text=True, timeout=BOUND, check=True
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _conversations(env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        [AGENTRT, "logs", "--json"], env=env, capture_output=True, text=True, timeout=BOUND, check=True
    ).stdout
    return {json.loads(line)["conversation_id"] for line in out.splitlines() if line.strip()}


@pytest.mark.parametrize(
    ("permissions", "answer", "decision", "by", "text"),
    [
        (None, "allow_once", "allow", "user", "allowed:echo hi"),
        (None, "reject_once", "deny", "user", "denied:"),
        (None, "allow_always", "allow", "user:always", "allowed:echo hi"),
        ('{ allow = ["Bash(echo hi)"] }', "reject_once", "allow", "rule:config allow Bash(echo hi)", "allowed:echo hi"),
        ('{ mode = "deny" }', "allow_once", "deny", "mode:deny (config)", "denied:"),
    ],
    ids=["client-allows", "client-denies", "client-always", "agent-rule", "agent-mode"],
)
def test_each_bridge_decision_is_in_logs_approvals(
    tmp_path: Path, permissions: str | None, answer: str, decision: str, by: str, text: str
) -> None:
    env = _env(tmp_path, permissions)
    client, sid = _one_turn(env, answer)
    assert client.text.startswith(text), client.text
    assert len(client.asked) == (0 if permissions else 1)
    rows = _approvals(env)
    assert len(rows) == 1, rows
    (row,) = rows
    assert (row["decision"], row["by"], row["tool"]) == (decision, by, "Bash"), row
    assert row["thread"] == f"acp-{sid}"
    assert row["agent"] == "fx"  # joined through the recorded conversation
    assert "echo hi" in row["summary"]
    assert row["conversation_id"] in _conversations(env)


def test_allow_always_is_recorded_as_run_records_its_a_answer(tmp_path: Path) -> None:
    # run records its "a" answer by "user:always" and what that answer covers later by "always".
    env = _env(tmp_path, None)
    client, _sid = _one_turn(env, "allow_always", turns=2)
    assert len(client.asked) == 1  # the second turn's request is covered by the first answer
    rows = sorted(_approvals(env), key=lambda r: r["at"])
    assert [(r["decision"], r["by"]) for r in rows] == [("allow", "user:always"), ("allow", "always")], rows


def test_logs_disabled_records_no_decision(tmp_path: Path) -> None:
    env = _env(tmp_path, None)
    config = Path(env["AGENTRT_CONFIG"])
    config.write_text("[logs]\nenabled = false\n" + config.read_text())
    client, _sid = _one_turn(env, "allow_once")
    assert client.text.startswith("allowed:echo hi")
    assert _approvals(env) == []
