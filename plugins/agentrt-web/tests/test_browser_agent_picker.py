"""A new web thread can talk to any configured agent (a picker beside New thread); the thread remembers it.

Debian's chromium through Playwright against a real ``agentrt web`` whose config file has two agents,
both the fixture agent CLI, each logging its starts to its own file; the real database records which
agent each conversation had.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from .conftest import base_env
from .test_browser_chat import last_assistant, say, shot
from .test_security import csrf_of


def _env(tmp: Path, agent: Path) -> dict[str, str]:
    env = base_env(tmp, agent)
    for key in ("AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON"):
        env.pop(key)
    (tmp / "config.toml").write_text(
        f'default_agent = "one"\n'
        f'[agents.one]\nexecutable = "{agent}"\nargs = ["--argv-log", "{tmp / "one.log"}"]\nmodel = "model-one"\n'
        f'[agents.two]\nexecutable = "{agent}"\nargs = ["--argv-log", "{tmp / "two.log"}"]\nmodel = "model-two"\n'
        '[agents.ghost]\nexecutable = "no-such-agent-on-path"\n')
    env["AGENTRT_CONFIG"] = str(tmp / "config.toml")
    return env


def _starts(tmp: Path, which: str) -> int:
    path = tmp / f"{which}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_new_thread_talks_to_the_picked_agent_and_remembers_it(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    srv = server_factory(_env(tmp_path, agent), "--no-bots")
    page = browser.new_page()
    page.goto(srv.url + "/")
    pick = page.locator("#new-agent")
    assert pick.locator("option").all_inner_texts() == ["one (default)", "ghost", "two"]
    pick.select_option("two")
    shot(page, "agent-picker.png")
    page.click("#new-thread")
    page.wait_for_url("**/threads/*")
    name = page.url.rsplit("/", 1)[1]
    assert page.locator("#agent-info").inner_text().split() == ["two", "model-two"]
    say(page, "hello two")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    assert last_assistant(page).locator(".reply").inner_text().strip() == "echo: hello two"
    assert (_starts(tmp_path, "one"), _starts(tmp_path, "two")) == (0, 1)

    # The picker keeps its choice in this browser; the default agent is one pick away.
    page.goto(srv.url + "/")
    assert page.locator("#new-agent").input_value() == "two"
    page.locator("#new-agent").select_option("")
    page.click("#new-thread")
    page.wait_for_url("**/threads/*")
    assert page.locator("#agent-info").inner_text().split() == ["one", "model-one"]
    say(page, "hello one")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    assert (_starts(tmp_path, "one"), _starts(tmp_path, "two")) == (1, 1)

    # After a restart the first thread still talks to its agent (resuming its session).
    srv.stop()
    srv = server_factory(_env(tmp_path, agent), "--no-bots")
    page.goto(f"{srv.url}/threads/{name}")
    assert page.locator("#agent-info").inner_text().split()[0] == "two"
    say(page, "again")
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming) .reply p').length === 2")
    assert (_starts(tmp_path, "one"), _starts(tmp_path, "two")) == (1, 2)
    last = json.loads((tmp_path / "two.log").read_text().splitlines()[-1])
    assert "--resume" in last
    db = sqlite3.connect(tmp_path / "agentrt.db")
    rows = db.execute("SELECT t.name, c.agent FROM conversations c JOIN threads t ON c.thread_id = t.id"
                      " ORDER BY c.started_at").fetchall()
    db.close()
    assert [agent for thread, agent in rows if thread == name] == ["two", "two"]
    assert len([1 for _, agent in rows if agent == "one"]) == 1


def test_the_thread_route_takes_an_agent_and_refuses_an_unknown_one(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    srv = server_factory(_env(tmp_path, agent), "--no-bots")
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        csrf = {"x-csrf-token": csrf_of(c.get("/", headers={"accept": "text/html"}).text)}
        r = c.post("/api/threads", headers=csrf, json={"agent": "nope"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_agent"
        assert r.json()["error"]["detail"] == "no agent named 'nope' in the config file"  # no path, no list
        assert c.post("/api/threads", headers=csrf, json={"agent": 3}).status_code == 400
        # An agent that cannot start: its code for the page, the reason (with the config's path) in the log.
        r = c.post("/api/threads", headers=csrf, json={"agent": "ghost"})
        assert r.status_code == 400 and r.json()["error"] == {
            "code": "config_invalid", "detail": "the agent 'ghost' cannot start; the server's log says why"}
        assert c.post("/api/threads", headers=csrf).status_code == 201  # no body: the default agent
        name = c.post("/api/threads", headers=csrf, json={"agent": "two"}).json()["name"]
        assert c.post(f"/api/threads/{name}/messages", headers=csrf, json={"text": "hi"}).status_code == 202
    db = sqlite3.connect(tmp_path / "agentrt.db")
    assert db.execute("SELECT agent FROM threads WHERE name = ?", (name,)).fetchone() == ("two",)
    db.close()
    srv.stop()
    assert b"agent 'ghost': config_invalid: " in srv.output and b"no-such-agent-on-path" in srv.output
