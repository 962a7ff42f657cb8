"""The web UI over odd-but-valid agent output: a lone surrogate mid-turn reaches the page and the database."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx

from .conftest import base_env
from .test_security import csrf_of, sse_until_terminal


def test_lone_surrogate_mid_turn_streams_to_the_page_and_is_stored(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        h = {"x-csrf-token": csrf_of(c.get("/", headers={"accept": "text/html"}).text)}
        name = c.post("/api/threads", headers=h).json()["name"]
        got = sse_until_terminal(
            c, name, lambda: c.post(f"/api/threads/{name}/messages", json={"text": "surrogate"}, headers=h)
        )
        assert got[-1]["k"] == "done", got
        assert "before cut \ufffd after" in got[-1]["html"]
        # The thread goes on: the next turn streams as usual.
        again = sse_until_terminal(
            c, name, lambda: c.post(f"/api/threads/{name}/messages", json={"text": "next"}, headers=h)
        )
        assert again[-1]["k"] == "done" and "echo: next" in again[-1]["html"]
    srv.stop()  # flushes and closes the database sink
    with sqlite3.connect(tmp_path / "agentrt.db") as conn:
        replies = [row[0] for row in conn.execute("SELECT reply FROM turns ORDER BY started_at")]
    assert replies == ["before cut \ufffd after", "echo: next"]
    assert b"sink_failed" not in srv.output and b"Traceback" not in srv.output
