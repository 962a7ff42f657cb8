"""Tool approval in the browser with the real Claude Code CLI: its permission question becomes the card.

Claude Code (``.peers/``) talks to the loopback fake Anthropic API, which asks
for ``Bash`` with a ``touch`` of a file in the test's directory; agentrt started
it with ``--permission-prompt-tool stdio``, so the page's Approve or Deny decides.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentrt.testing.fake_apis import serve_fake_anthropic
from agentrt.testing.real_peers import CLAUDE_CODE, peer_path

from .conftest import base_env

CLAUDE = peer_path(CLAUDE_CODE)


@pytest.mark.parametrize("button", ["allow", "deny"])
def test_the_card_answers_claude_codes_permission_question(tmp_path: Path, agent: Path, server_factory: Any,
                                                           browser: Any, button: str) -> None:
    if not CLAUDE.is_file():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    made = tmp_path / "made.txt"
    (tmp_path / "claude-home").mkdir()
    with serve_fake_anthropic(tool_command=f"touch {made}") as api:
        agent_env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-test-not-a-secret",
                     "HOME": str(tmp_path / "claude-home"), "DISABLE_TELEMETRY": "1",
                     "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        env_line = ", ".join(f"{k} = {json.dumps(v)}" for k, v in agent_env.items())
        (tmp_path / "config.toml").write_text(
            f'[agents.claude]\nexecutable = "{CLAUDE}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
            f"env = {{ {env_line} }}\n")
        env = base_env(tmp_path, agent)
        for key in ("AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON"):
            env.pop(key)
        env["AGENTRT_CONFIG"] = str(tmp_path / "config.toml")
        srv = server_factory(env, "-a", "claude", "--no-bots")
        page = browser.new_page()
        page.goto(srv.url + "/")
        page.click("#new-thread")
        page.wait_for_url("**/threads/*")
        page.wait_for_selector("#prompt")
        page.fill("#prompt", "make the file")
        page.click("#send")
        card = page.locator(".approval").last
        card.locator(".question").filter(has_text="Allow Bash?").wait_for(timeout=90_000)
        assert f"touch {made}" in card.locator(".summary").inner_text()
        card.locator(f"button.{button}").click()
        page.wait_for_selector(".msg.assistant:not(.streaming) .reply p", timeout=90_000)
        reply = page.locator(".msg.assistant").last.locator(".reply").inner_text().strip()
    assert reply.startswith("The tool said: ")
    assert made.exists() is (button == "allow")
    db = sqlite3.connect(tmp_path / "agentrt.db")
    rows = db.execute("SELECT tool, decision, by FROM approvals").fetchall()
    db.close()
    assert rows == [("Bash", button, "user")]
