"""The web server under hostile load: cookie-less floods, made-up stream ids, streams left open at shutdown."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agentrt_web import _sessions
from agentrt_web._hub import Hub, sse_frame
from agentrt_web._server import WebOptions, serve_web

from .conftest import WEB_TOKEN, agent_pids, alive, base_env

FLOOD = 300  # cookie-less requests: far more than the session table below may hold
TABLE = 50


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert m, html[:300]
    return m.group(1)


async def start_server(nursery: trio.Nursery, env: dict[str, str], **options: Any) -> tuple[Any, str, trio.Event]:
    stop = trio.Event()
    opts = WebOptions(host="127.0.0.1", port=0, supervise_bots=False, **options)
    urls: list[str] = []
    state = await nursery.start(lambda task_status: serve_web(
        opts, env=env, stop=stop, on_ready=urls.extend, task_status=task_status))
    return state, urls[0], stop


async def flood(url: str) -> None:
    """Cookie-less requests of every kind a scanner sends: pages, the login form, API, streams, bad POSTs."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as anon:
        for i in range(FLOOD):
            anon.cookies.clear()  # a new visitor each time
            path = ("/", "/login", "/api/threads", "/bots", "/nope")[i % 5]
            await anon.get(path, headers={"accept": "text/html"})
            anon.cookies.clear()
            await anon.post("/login", data={"csrf": "x", "token": "y"})


@pytest.mark.parametrize("token", [WEB_TOKEN, None], ids=["token", "loopback-no-token"])
async def test_cookieless_flood_keeps_the_user_logged_in_and_the_session_table_flat(
    tmp_path: Path, agent: Path, monkeypatch: pytest.MonkeyPatch, token: str | None
) -> None:
    # A small table, so that a flood which stored sessions would evict the user well within FLOOD requests.
    monkeypatch.setattr(_sessions, "_MAX_SESSIONS", TABLE)
    env = base_env(tmp_path, agent, **({"AGENTRT_WEB_TOKEN": token} if token else {}))
    async with trio.open_nursery() as nursery:
        state, url, stop = await start_server(nursery, env, token=token)
        async with httpx.AsyncClient(base_url=url, timeout=30) as user:
            csrf = csrf_of((await user.get("/login")).text)
            if token is not None:
                r = await user.post("/login", data={"csrf": csrf, "token": token, "next": "/"})
                assert r.status_code == 303
            page = await user.get("/", headers={"accept": "text/html"})
            assert page.status_code == 200
            csrf = csrf_of(page.text)
            kept = len(state.sessions)
            assert kept == (1 if token else 0)  # only a login is stored

            await flood(url)

            assert len(state.sessions) == kept
            # Still logged in, and the page's CSRF token still works.
            assert (await user.get("/api/threads")).status_code == 200
            assert (await user.post("/api/threads", headers={"x-csrf-token": csrf})).status_code == 201
        stop.set()


async def test_streams_for_unknown_ids_are_404_and_create_no_topic(tmp_path: Path, agent: Path) -> None:
    async with trio.open_nursery() as nursery:
        state, url, stop = await start_server(nursery, base_env(tmp_path, agent))
        before = state.hub.topics()
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            for i in range(50):
                r = await c.get(f"/events/threads/made-up-{i}")
                assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_thread"
                r = await c.get(f"/events/bots/made-up-{i}")
                assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_bot"
        assert state.hub.topics() == before
        stop.set()


async def test_topics_are_freed_when_their_last_stream_leaves(tmp_path: Path, agent: Path) -> None:
    async with trio.open_nursery() as nursery:
        state, url, stop = await start_server(nursery, base_env(tmp_path, agent))
        name = await state.chats.create()
        before = state.hub.topics()
        opened = 0
        async with httpx.AsyncClient(base_url=url, timeout=30) as c, trio.open_nursery() as clients:
            done = trio.Event()

            async def listen(path: str, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                async with c.stream("GET", path) as resp:
                    assert resp.status_code == 200
                    task_status.started()
                    await done.wait()  # then leave: the response is closed mid-stream

            for _ in range(3):
                for path in (f"/events/threads/{name}", "/events/bots"):
                    await clients.start(listen, path)
                    opened += 1
            assert state.hub.topics() == before + 2 and state.hub.streams() == opened
            done.set()
        with trio.fail_after(30):  # hang guard: the server notices each disconnect
            await state.hub.wait_idle()
        assert state.hub.topics() == before
        stop.set()


async def test_a_freed_topic_resumes_its_numbering_without_a_reload() -> None:
    hub = Hub()
    sub = hub.subscribe("t")
    for n in range(3):
        hub.publish("t", sse_frame({"n": n}))
    stream = hub.stream(sub)
    await stream.__anext__()
    await stream.aclose()  # the only stream leaves: the topic is freed
    assert hub.topics() == 0
    drawn_at = hub.last_id("t")
    assert drawn_at == f"{hub.epoch}:3"  # a page drawn now still sees the topic's position
    again = hub.subscribe("t", drawn_at)
    assert again.backlog == []  # up to date: no reload loop
    hub.publish("t", sse_frame({"n": 3}))
    assert again.receive.receive_nowait().startswith(f"id: {hub.epoch}:4\n".encode())
    hub.forget("t")  # the thread is deleted
    assert hub.topics() == 0 and hub.last_id("t") == f"{hub.epoch}:0"


class RawSSE:
    """A keep-alive HTTP/1.1 stream request on its own connection, as a browser's EventSource sends it."""

    def __init__(self, sock: trio.SocketStream) -> None:
        self.sock = sock
        self.seen = b""

    @classmethod
    async def open(cls, port: int, path: str) -> RawSSE:
        sock = await trio.open_tcp_stream("127.0.0.1", port)
        await sock.send_all(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
        return cls(sock)

    async def read_until(self, marker: bytes) -> None:
        while marker not in self.seen:
            chunk = await self.sock.receive_some(65536)
            assert chunk, f"connection closed before {marker!r}: {self.seen[-200:]!r}"
            self.seen += chunk

    async def ended_and_closed(self) -> None:
        """The response ended cleanly (the last chunk), then the server closed the connection."""
        await self.read_until(b"\r\n0\r\n\r\n")
        while await self.sock.receive_some(65536):
            pass
        await self.sock.aclose()


async def test_shutdown_closes_kept_alive_connections_after_their_streams_end(tmp_path: Path, agent: Path) -> None:
    # The browser keeps the connection of an ended stream open to reconnect on.  hypercorn would wait its
    # graceful timeout (60 s here) for such a connection; the hang guard trips long before that.
    async with trio.open_nursery() as nursery:
        state, url, stop = await start_server(nursery, base_env(tmp_path, agent), graceful_timeout=60.0)
        port = int(url.rsplit(":", 1)[1])
        name = await state.chats.create()
        socks = [await RawSSE.open(port, p) for p in [f"/events/threads/{name}"] * 3 + ["/events/bots"] * 2]
        with trio.fail_after(30):
            for s in socks:
                await s.read_until(b": open")
            stop.set()
            for s in socks:
                await s.ended_and_closed()


async def test_sigterm_with_pages_streaming_ends_streams_reaps_agents_and_exits(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    port = int(srv.url.rsplit(":", 1)[1])
    async with httpx.AsyncClient(base_url=srv.url, timeout=30) as c:
        csrf = csrf_of((await c.get("/", headers={"accept": "text/html"})).text)
        names = [(await c.post("/api/threads", headers={"x-csrf-token": csrf})).json()["name"] for _ in range(2)]
        socks = [await RawSSE.open(port, p) for p in [f"/events/threads/{n}" for n in names] + ["/events/bots"]]
        with trio.fail_after(30):
            for s in socks:
                await s.read_until(b": open")
            # One thread mid-turn (an agent that never finishes), one idle after a turn.
            r = await c.post(f"/api/threads/{names[0]}/messages", headers={"x-csrf-token": csrf}, json={"text": "hi"})
            assert r.status_code == 202
            await socks[0].read_until(b'"k":"done"')
            r = await c.post(f"/api/threads/{names[1]}/messages", headers={"x-csrf-token": csrf},
                             json={"text": "hang"})
            assert r.status_code == 202
            await socks[1].read_until(b'"k":"text"')
    pids = agent_pids(tmp_path)
    assert len(pids) == 2 and all(alive(p) for p in pids)
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGTERM)
    with trio.fail_after(30):
        for s in socks:
            await s.ended_and_closed()
    try:
        code = await trio.to_thread.run_sync(srv.proc.wait, 30)
    except subprocess.TimeoutExpired:
        raise AssertionError("agentrt web did not exit on SIGTERM") from None
    # 0 today; 143 once the command reports the signal as its status.
    assert code == 143, srv.output
    assert not [p for p in pids if alive(p)]  # every agent was stopped and reaped
