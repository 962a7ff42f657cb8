"""The security wall: token when not on loopback, CSRF, headers, Host check, no secrets to the browser."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from .conftest import LLM_SECRET, WEB_TOKEN, argv_log, base_env
from .test_browser_chat import shot

CSP = re.compile(r"default-src 'self'.*frame-ancestors 'none'")


def loopback_url(url: str) -> str:
    # Bound to 0.0.0.0: reach it through 127.0.0.1 (the wall does not care which address is used).
    return re.sub(r"//[^:/]+", "//127.0.0.1", url, count=1)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert m, html[:500]
    return m.group(1)


def test_non_loopback_without_token_refuses_to_start(tmp_path: Path, agent: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentrt", "web", "--host", "0.0.0.0", "--port", "0"],
        env=base_env(tmp_path, agent), capture_output=True, timeout=30,
    )
    assert out.returncode == 2
    assert b"web_token_required" in out.stderr


def test_auth_wall_when_not_on_loopback(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent, AGENTRT_WEB_TOKEN=WEB_TOKEN), "--host", "0.0.0.0")
    url = loopback_url(srv.url)
    with httpx.Client(base_url=url, timeout=10) as c:
        r = c.get("/", headers={"accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        for path in ("/api/threads", "/events/bots", "/bots", "/static/../api/threads"):
            assert c.get(path).status_code == 401, path
        r = c.get("/login")
        assert r.status_code == 200 and WEB_TOKEN not in r.text
        token = csrf_of(r.text)
        # An action without being logged in: refused even with the right CSRF token.
        assert c.post("/api/threads", headers={"x-csrf-token": token}).status_code == 401
        bad = c.post("/login", data={"csrf": token, "token": "wrong-token-123", "next": "/"})
        assert bad.status_code == 401 and "not right" in bad.text
        ok = c.post("/login", data={"csrf": token, "token": WEB_TOKEN, "next": "/"})
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and WEB_TOKEN not in cookie
        page = c.get("/", headers={"accept": "text/html"})
        assert page.status_code == 200 and WEB_TOKEN not in page.text
        fresh = csrf_of(page.text)
        assert c.post("/api/threads", headers={"x-csrf-token": fresh}).status_code == 201
    # A bearer header works without a cookie (scripts), a wrong one does not.
    with httpx.Client(base_url=url, timeout=10) as c:
        assert c.get("/api/threads", headers={"authorization": f"Bearer {WEB_TOKEN}"}).status_code == 200
        assert c.post("/api/threads", headers={"authorization": f"Bearer {WEB_TOKEN}"}).status_code == 201
        assert c.get("/api/threads", headers={"authorization": "Bearer nope-nope-nope"}).status_code == 401
        # Guessing is throttled (more in test_throttle.py): the wrong login and bearer above count,
        # and after 5 failures a minute even the right token waits.
        for _ in range(3):
            assert c.get("/api/threads", headers={"authorization": "Bearer guess-guess"}).status_code == 401
        assert c.get("/api/threads", headers={"authorization": f"Bearer {WEB_TOKEN}"}).status_code == 429
    assert WEB_TOKEN.encode() not in srv.output


def test_browser_login(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent, AGENTRT_WEB_TOKEN=WEB_TOKEN), "--host", "0.0.0.0")
    url = loopback_url(srv.url)
    page = browser.new_page()
    page.goto(url + "/")
    page.wait_for_url("**/login?next=/")
    assert page.locator("#agent-info").count() == 0  # which agent runs here is for logged-in users
    shot(page, "login.png")
    page.fill("#token", "wrong-token-123")
    page.click("#login-form button")
    page.wait_for_selector("text=That token is not right.")
    page.fill("#token", WEB_TOKEN)
    page.click("#login-form button")
    page.wait_for_selector("#new-thread")
    assert page.locator("#agent-info .agent").inner_text() == "web-agent"
    cookies = browser.cookies()
    assert [c["httpOnly"] for c in cookies] == [True]
    assert all(WEB_TOKEN not in c["value"] for c in cookies)
    assert WEB_TOKEN not in page.content()


def test_csrf_and_origin(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        token = csrf_of(c.get("/", headers={"accept": "text/html"}).text)
        assert c.post("/api/threads").status_code == 403
        assert c.post("/api/threads", headers={"x-csrf-token": "forged"}).status_code == 403
        assert c.post("/api/threads", data={"csrf": "forged"}).status_code == 403
        evil = {"x-csrf-token": token, "origin": "http://evil.example"}
        assert c.post("/api/threads", headers=evil).status_code == 403
        assert c.post("/api/threads", headers={"x-csrf-token": token, "origin": "null"}).status_code == 403
        r = c.post("/api/threads", headers={"x-csrf-token": token, "origin": srv.url})
        assert r.status_code == 201
        # GET never changes state.
        assert c.get(f"/api/threads/{r.json()['name']}/delete").status_code == 405
    # Another browser (no session) cannot reuse the token.
    with httpx.Client(base_url=srv.url, timeout=10) as other:
        assert other.post("/api/threads", headers={"x-csrf-token": token}).status_code == 403


def test_headers_and_host_check(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        for path in ("/", "/static/app.js", "/api/threads", "/nope", "/bots"):
            r = c.get(path)
            assert CSP.search(r.headers["content-security-policy"]), path
            assert "unsafe-inline" not in r.headers["content-security-policy"]
            assert r.headers["x-content-type-options"] == "nosniff"
        page = c.get("/", headers={"accept": "text/html"}).text
        assert "<script>" not in page
        assert not re.search(r"<script(?![^>]*\bsrc=)", page)  # only external scripts
        assert not re.search(r"\son[a-z]+=", page)  # no inline handlers
        assert "style=" not in page
        # DNS rebinding: a foreign Host header gets nothing.
        assert c.get("/", headers={"host": "evil.example"}).status_code == 421
        assert LLM_SECRET not in page


def test_bad_input_gets_a_coded_error(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        token = csrf_of(c.get("/", headers={"accept": "text/html"}).text)
        h = {"x-csrf-token": token}
        for name in ("a" * 65, "bad name", "semi;colon"):
            r = c.post(f"/api/threads/{name}/messages", json={"text": "hi"}, headers=h)
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_thread_name", name
        r = c.post("/api/threads/nosuch/messages", json={"text": "hi"}, headers=h)
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_thread"
        name = c.post("/api/threads", headers=h).json()["name"]
        r = c.post(f"/api/threads/{name}/messages", content=b"not json", headers=h)
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
        r = c.post(f"/api/threads/{name}/messages", json={"text": "   "}, headers=h)
        assert r.status_code == 400 and r.json()["error"]["code"] == "empty_prompt"
        r = c.post(f"/api/threads/{name}/messages", json={"text": "x" * 100_001}, headers=h)
        assert r.status_code == 413 and r.json()["error"]["code"] == "prompt_too_long"
        assert c.post(f"/api/threads/{name}/messages", json={"text": "hang"}, headers=h).status_code == 202
        r = c.post(f"/api/threads/{name}/messages", json={"text": "again"}, headers=h)
        assert r.status_code == 409 and r.json()["error"]["code"] == "turn_in_progress"
        assert c.post(f"/api/threads/{name}/cancel", headers=h).json() == {"cancelled": True}
        assert c.get("/bots/nosuch").status_code == 404


def sse_until_terminal(c: httpx.Client, name: str, send: Any) -> list[dict[str, Any]]:
    """Open the thread's stream, call ``send()``, collect messages up to the turn's terminal one."""
    import json

    got: list[dict[str, Any]] = []
    with c.stream("GET", f"/events/threads/{name}") as s:
        send()
        for line in s.iter_lines():
            if line.startswith("data: "):
                for m in json.loads(line[6:])["m"]:
                    got.append(m)
                    if m["k"] in ("done", "failed"):
                        return got
    raise AssertionError(f"stream ended early: {got}")


def test_agent_crash_mid_turn_then_resume(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        h = {"x-csrf-token": csrf_of(c.get("/", headers={"accept": "text/html"}).text)}
        name = c.post("/api/threads", headers=h).json()["name"]
        first = sse_until_terminal(c, name, lambda: c.post(f"/api/threads/{name}/messages", json={"text": "hi"},
                                                                headers=h))
        assert first[-1]["k"] == "done"
        crash = sse_until_terminal(c, name, lambda: c.post(f"/api/threads/{name}/messages",
                                                                json={"text": "crash"}, headers=h))
        assert crash[-1]["k"] == "failed" and crash[-1]["code"] == "exit_before_result", crash
        assert "about to crash" in crash[-1]["html"]  # what arrived is kept
        again = sse_until_terminal(c, name, lambda: c.post(f"/api/threads/{name}/messages",
                                                                json={"text": "back"}, headers=h))
        assert again[-1]["k"] == "done" and "echo: back" in again[-1]["html"]
    starts = argv_log(tmp_path)
    assert len(starts) == 2 and "--resume" in starts[1]


def test_spawn_failure_is_a_coded_error(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        h = {"x-csrf-token": csrf_of(c.get("/", headers={"accept": "text/html"}).text)}
        name = c.post("/api/threads", headers=h).json()["name"]
        agent.unlink()  # the executable vanished after start-up
        r = c.post(f"/api/threads/{name}/messages", json={"text": "hi"}, headers=h)
        # Re-checked before the spawn: the launch contract's own code, not a failed exec.
        assert r.status_code == 502 and r.json()["error"]["code"] == "cli_executable_not_found"
        assert c.get("/api/health").json()["ok"] is True  # the server goes on


async def test_bot_timeline_is_paged(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    from agentrt.bots import BotRecord
    from agentrt_sqlite.api import SqliteStore

    from .conftest import write_bots

    store = SqliteStore(tmp_path / "agentrt.db")
    await store.save_bot(BotRecord(bot_id="b1", config={"sandbox_api_key": "sk-sandbox-secret-xyz"}, model="gpt-snap"))
    for i in range(120):
        await store.append_timeline("b1", {"type": "runtime_error", "message": f"event number {i:03d}"})
    await store.aclose()
    env = base_env(tmp_path, agent, AGENTRT_BOTS_CONFIG=str(write_bots(tmp_path)))
    srv = server_factory(env, "--no-bots")
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        first = c.get("/bots/b1").text
        assert '<dd id="bot-model">gpt-snap</dd>' in first  # the start's model snapshot
        assert c.get("/api/bots").json()["bots"][0]["model"] == "gpt-snap"
        assert "event number 000" in first and "event number 049" in first and "event number 050" not in first
        assert 'href="/bots/b1?offset=50"' in first and "Earlier" not in first
        last = c.get("/bots/b1?offset=100").text
        assert "event number 119" in last and "event number 099" not in last
        assert 'href="/bots/b1?offset=50"' in last and "Later" not in last
        assert "note" in c.get("/bots").text  # no supervisor here: actions go through the store
        for page in (first, last, c.get("/api/bots").text, c.get("/bots").text):
            assert "sk-sandbox-secret-xyz" not in page
        h = {"x-csrf-token": csrf_of(first), "accept": "application/json"}
        assert c.post("/bots/b1/start", headers=h).json() == {"ok": True}
        assert c.get("/api/bots").json()["bots"][0]["desired_state"] == "running"
        assert c.post("/bots/b1/reissue-qr", headers=h).status_code == 200
        assert c.get("/api/bots").json()["bots"][0]["desired_state"] == "reissue_qr"
        assert c.post("/bots/b1/explode", headers=h).json()["error"]["code"] == "unknown_action"
        assert c.post("/bots/nosuch/start", headers=h).json()["error"]["code"] == "unknown_bot"


def test_bad_configuration_exits_2_with_its_code(tmp_path: Path, agent: Path) -> None:
    cases = [
        ({"AWP_AGENT_CLI_EXECUTABLE": ""}, b"cli_executable_not_found"),
        ({"AGENTRT_WEB_TOKEN": "short"}, b"web_token_too_short"),
    ]
    for extra, code in cases:
        env = base_env(tmp_path, agent, **extra)
        if not extra.get("AWP_AGENT_CLI_EXECUTABLE", "x"):
            del env["AWP_AGENT_CLI_EXECUTABLE"]
        out = subprocess.run([sys.executable, "-m", "agentrt", "web", "--port", "0"], env=env,
                             capture_output=True, timeout=30)
        assert out.returncode == 2 and code in out.stderr, out.stderr
        assert b"short" not in out.stderr.replace(b"too_short", b"")  # the value is never echoed
