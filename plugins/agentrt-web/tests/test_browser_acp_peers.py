"""Tool approval in the browser with Gemini CLI and Codex (``codex-acp``), the real ACP peers of ``.peers/``.

The peer talks to its loopback fake model API, which calls for a shell
``touch`` of a file; the peer asks agentrt's policy (``session/request_permission``),
which puts the question on the page as a card: Approve runs the command, Deny
refuses it, and the decision is recorded as the page's user's.  Stop mid-reply
(the fake API holding the rest) ends the turn and the thread goes on.  The agent
is configured as a user would (``protocol = "acp"``, a first-output bound).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentrt.testing.real_peers import BOUND, PEER_LIST, Peer, executable_and_args, fake_api, launch_env, require

from .conftest import base_env


def _serve(tmp_path: Path, agent: Path, server_factory: Any, peer: Peer, url: str) -> Any:
    """A web server whose default agent is ``peer`` against the fake API at ``url``, from a config file."""
    executable, args = executable_and_args(peer)
    agent_env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in launch_env(peer, tmp_path / "peer", url).items())
    (tmp_path / "config.toml").write_text(
        f'[agents.peer]\nexecutable = "{executable}"\nargs = {json.dumps(list(args))}\nprotocol = "acp"\n'
        f'model = "{peer.model}"\nenv = {{ {agent_env} }}\nfirst_output_timeout = {BOUND}\n'
    )
    env = base_env(tmp_path, agent)
    for key in ("AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON"):
        env.pop(key)
    env["AGENTRT_CONFIG"] = str(tmp_path / "config.toml")
    return server_factory(env, "-a", "peer", "--no-bots")


@pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)
@pytest.mark.parametrize("button", ["allow", "deny"])
def test_the_card_answers_the_acp_peers_permission_request(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any, peer: Peer, button: str
) -> None:
    require(peer)
    made = tmp_path / "made.txt"
    with fake_api(peer, tool_command=f"touch {made}") as api:
        srv = _serve(tmp_path, agent, server_factory, peer, api.url)
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


@pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)
def test_stop_mid_reply_ends_the_turn_and_the_thread_goes_on(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any, peer: Peer
) -> None:
    require(peer)
    with fake_api(peer, reply="A long reply the user stops.", hold=True) as api:
        try:
            srv = _serve(tmp_path, agent, server_factory, peer, api.url)
            page = browser.new_page()
            page.goto(srv.url + "/")
            page.click("#new-thread")
            page.wait_for_url("**/threads/*")
            page.wait_for_selector("#prompt")
            page.fill("#prompt", "talk")
            page.click("#send")
            page.wait_for_function("() => (document.querySelector('.msg.assistant.streaming .reply')||{})"
                                   ".textContent?.includes('A long')", timeout=BOUND * 1000)
            page.click("#stop")
            page.wait_for_selector(".msg.assistant .stopped", timeout=BOUND * 1000)
            assert page.locator(".msg.assistant .stopped").count() == 1
            api.release()
            page.fill("#prompt", "again")
            page.click("#send")
            page.wait_for_function("() => [...document.querySelectorAll('.msg.assistant:not(.streaming) .reply')]"
                                   ".some(r => r.textContent.includes('A long reply the user stops.'))",
                                   timeout=BOUND * 1000)
        finally:
            api.release()
    db = sqlite3.connect(tmp_path / "agentrt.db")
    codes = [row[0] for row in db.execute("SELECT code FROM turns ORDER BY id").fetchall()]
    db.close()
    assert codes[0] == "turn_cancelled", codes
