"""Tool approval in the browser with Gemini CLI and Codex (``codex-acp``), the real ACP peers of ``.peers/``.

The peer talks to its loopback fake model API, which calls for a shell
``touch`` of a file; the peer asks agentrt's policy (``session/request_permission``),
which puts the question on the page as a card: Approve runs the command, Deny
refuses it, and the decision is recorded as the page's user's.  The agent is
configured as a user would (``protocol = "acp"``, its preset's first-output bound).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import base_env

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "dialects" / "fixtures"))
from real_acp_peers import BOUND, PEER_LIST, Peer, executable_and_args, fake_api, launch_env, require


@pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)
@pytest.mark.parametrize("button", ["allow", "deny"])
def test_the_card_answers_the_acp_peers_permission_request(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any, peer: Peer, button: str
) -> None:
    require(peer)
    made = tmp_path / "made.txt"
    executable, args = executable_and_args(peer)
    with fake_api(peer, tool_command=f"touch {made}") as api:
        agent_env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in launch_env(peer, tmp_path / "peer", api.url).items())
        (tmp_path / "config.toml").write_text(
            f'[agents.peer]\nexecutable = "{executable}"\nargs = {json.dumps(list(args))}\nprotocol = "acp"\n'
            f'model = "{peer.model}"\nenv = {{ {agent_env} }}\nfirst_output_timeout = {BOUND}\n'
        )
        env = base_env(tmp_path, agent)
        for key in ("AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON"):
            env.pop(key)
        env["AGENTRT_CONFIG"] = str(tmp_path / "config.toml")
        srv = server_factory(env, "-a", "peer", "--no-bots")
        page = browser.new_page()
        page.goto(srv.url + "/")
        page.click("#new-thread")
        page.wait_for_url("**/threads/*")
        page.wait_for_selector("#prompt")
        page.fill("#prompt", "make the file")
        page.click("#send")
        card = page.locator(".approval").last
        card.locator(".question").wait_for(timeout=BOUND * 1000)
        assert f"touch {made}" in card.inner_text()
        assert not made.exists()  # nothing runs before the answer
        card.locator(f"button.{button}").click()
        page.wait_for_selector(".msg.assistant:not(.streaming)", timeout=BOUND * 1000)
        if button == "allow":
            page.wait_for_selector(".msg.assistant:not(.streaming) .reply p", timeout=BOUND * 1000)
            reply = page.locator(".msg.assistant").last.locator(".reply").inner_text().strip()
            assert reply.startswith("The tool said:"), reply
    assert made.exists() is (button == "allow")
    db = sqlite3.connect(tmp_path / "agentrt.db")
    rows = db.execute("SELECT decision, by FROM approvals").fetchall()
    db.close()
    assert rows == [(button, "user")]
