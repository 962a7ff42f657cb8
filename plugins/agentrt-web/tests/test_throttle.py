"""One throttle for every failed credential: the login form, ``Authorization: Bearer`` and the session cookie.

A real ``agentrt web`` behind a token; each test has its own server, so its own table.  After 5
failures a minute from one address, every credential from it gets 429, the right one too.
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Any

import httpx

from .conftest import WEB_TOKEN, base_env
from .test_security import csrf_of, loopback_url

RIGHT = {"authorization": f"Bearer {WEB_TOKEN}"}
WRONG = {"authorization": "Bearer not-the-token-0000"}


def _server(tmp: Path, agent: Path, server_factory: Any) -> str:
    srv = server_factory(base_env(tmp, agent, AGENTRT_WEB_TOKEN=WEB_TOKEN), "--host", "0.0.0.0", "--no-bots")
    return loopback_url(srv.url)


def _login(c: httpx.Client, token: str) -> httpx.Response:
    csrf = csrf_of(c.get("/login").text)
    return c.post("/login", data={"csrf": csrf, "token": token, "next": "/"})


def _forged_cookie() -> str:
    # The shape of a real session id (43 URL-safe characters), naming no session of the server.
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def _with_cookie(url: str, sid: str) -> httpx.Response:
    """``GET /api/threads`` from a fresh client presenting session cookie ``sid``."""
    with httpx.Client(base_url=url, timeout=10) as c:
        return c.get("/api/threads", headers={"cookie": f"agentrt_session={sid}"})


def _throttled(r: httpx.Response) -> bool:
    return r.status_code == 429 and int(r.headers["retry-after"]) > 0


def test_wrong_bearer_tokens_are_throttled_then_the_right_one_waits(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    url = _server(tmp_path, agent, server_factory)
    with httpx.Client(base_url=url, timeout=10) as c:
        assert c.get("/api/threads", headers=RIGHT).status_code == 200
        for _ in range(5):
            assert c.get("/api/threads", headers=WRONG).status_code == 401
        r = c.get("/api/threads", headers=RIGHT)
        assert _throttled(r), r.text
        assert r.text.startswith("too_many_attempts:")
        assert _throttled(c.get("/api/threads", headers=WRONG))
        # The same table: the login form waits too.
        assert _login(c, WEB_TOKEN).status_code == 429


def test_forged_session_cookies_are_throttled_and_a_logged_in_one_waits(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    url = _server(tmp_path, agent, server_factory)
    with httpx.Client(base_url=url, timeout=10) as user:
        assert _login(user, WEB_TOKEN).status_code == 303
        assert user.get("/api/threads").status_code == 200
        for _ in range(5):
            r = _with_cookie(url, _forged_cookie())
            assert r.status_code == 401
            # The response replaces the cookie: a stale one in a real browser counts once.
            assert "agentrt_session=" in r.headers["set-cookie"]
        assert _throttled(_with_cookie(url, _forged_cookie()))
        # A right cookie (a logged-in session) from the same address waits as well...
        assert _throttled(user.get("/api/threads"))
        # ...as does the right bearer token.
        assert _throttled(user.get("/api/threads", headers=RIGHT))


def test_wrong_logins_throttle_every_credential_kind(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    url = _server(tmp_path, agent, server_factory)
    with httpx.Client(base_url=url, timeout=10) as c:
        for _ in range(5):
            assert _login(c, "guess-guess-guess").status_code == 401
        r = _login(c, WEB_TOKEN)
        assert _throttled(r) and "Too many attempts" in r.text
        assert _throttled(c.get("/api/threads", headers=RIGHT))


def test_mixed_kinds_share_one_count_and_anonymous_visits_count_nothing(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    url = _server(tmp_path, agent, server_factory)
    with httpx.Client(base_url=url, timeout=10) as c:
        # A browser that has not logged in is turned away without a count, however often it asks.
        for _ in range(20):
            assert c.get("/api/threads").status_code == 401
            assert c.get("/", headers={"accept": "text/html"}).status_code == 303
        assert c.get("/api/threads", headers=RIGHT).status_code == 200
        # Two wrong bearers, two forged cookies, one wrong login: five failures of one address.
        for _ in range(2):
            assert c.get("/api/threads", headers=WRONG).status_code == 401
        for _ in range(2):
            assert _with_cookie(url, _forged_cookie()).status_code == 401
        assert _login(c, "guess-guess-guess").status_code == 401
        assert _throttled(c.get("/api/threads", headers=RIGHT))


def test_without_a_token_nothing_is_throttled(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent), "--no-bots")
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        for _ in range(8):
            assert _with_cookie(srv.url, _forged_cookie()).status_code == 200
        assert c.get("/api/threads", headers=WRONG).status_code == 401
