"""Tool approval in the browser: the stream-json fixture agent asks to run a command; the page answers.

Debian's chromium through Playwright against a real ``agentrt web``; the
decisions land in the real database.
"""

from __future__ import annotations

import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

from agentrt_stream_json import fixture_agent

from .conftest import base_env, new_thread, say

FIXTURE = Path(fixture_agent.__file__)
QUESTION = "Allow Bash?"


def _env(tmp: Path, agent: Path) -> dict[str, str]:
    exe = tmp / "bin" / "fake-claude"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    env = base_env(tmp, agent)
    (tmp / "config.toml").write_text(
        f'[agents.claude]\nexecutable = "{exe}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
        'env = { STREAM_JSON_FIXTURE_MODE = "permission", STREAM_JSON_FIXTURE_COMMAND = "git status --short" }\n')
    for key in ("AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON"):
        env.pop(key)
    env["AGENTRT_CONFIG"] = str(tmp / "config.toml")
    return env


def test_approve_and_deny_buttons_answer_the_agent(tmp_path: Path, agent: Path, server_factory: Any,
                                                   browser: Any) -> None:
    srv = server_factory(_env(tmp_path, agent), "-a", "claude", "--no-bots")
    page = browser.new_page()
    name = new_thread(page, srv.url)

    say(page, "first")
    card = page.locator(".approval").last
    card.locator(".question").filter(has_text=QUESTION).wait_for()
    assert card.locator(".summary").inner_text() == "git status --short"
    card.locator("button.allow").click()
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    assert page.locator(".msg.assistant").last.locator(".reply").inner_text().strip() == "allowed:git status --short"
    assert card.locator(".note").inner_text() == "Approved"
    assert card.locator("button").count() == 0

    say(page, "second")
    page.locator(".approval").nth(1).locator("button.deny").click()
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming) .reply p').length === 2")
    reply = page.locator(".msg.assistant").last.locator(".reply").inner_text().strip()
    assert reply == "denied:agentrt: Bash(git status --short) denied by the user"

    db = sqlite3.connect(tmp_path / "agentrt.db")
    rows = db.execute("SELECT thread, tool, summary, decision, by FROM approvals ORDER BY id").fetchall()
    db.close()
    assert rows == [(name, "Bash", "git status --short", "allow", "user"),
                    (name, "Bash", "git status --short", "deny", "user")]


def test_an_unanswered_card_times_out_to_deny_with_a_note(tmp_path: Path, agent: Path, server_factory: Any,
                                                          browser: Any) -> None:
    srv = server_factory(_env(tmp_path, agent), "-a", "claude", "--no-bots", "--ask-timeout", "1")
    page = browser.new_page()
    new_thread(page, srv.url)
    say(page, "go")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    reply = page.locator(".msg.assistant").last.locator(".reply").inner_text().strip()
    assert reply == "denied:agentrt: Bash(git status --short) denied: no answer within 1s"
    card = page.locator(".approval").last
    assert card.locator(".note").inner_text() == "Denied: no answer in time"
    assert card.locator("button").count() == 0


def test_allow_tool_rule_needs_no_card_and_a_closed_question_is_409(tmp_path: Path, agent: Path,
                                                                    server_factory: Any, browser: Any) -> None:
    srv = server_factory(_env(tmp_path, agent), "-a", "claude", "--no-bots", "--allow-tool", "Bash(git status:*)")
    page = browser.new_page()
    name = new_thread(page, srv.url)
    say(page, "go")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    assert page.locator(".approval").count() == 0
    status = page.evaluate(
        """async (name) => {
          const token = document.querySelector('meta[name="csrf-token"]').content;
          const res = await fetch('/api/threads/' + name + '/approvals/nope', {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': token}, body: '{"decision":"allow"}'});
          return res.status;
        }""",
        name,
    )
    assert status == 409
