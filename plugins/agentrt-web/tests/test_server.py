"""The server in-process under trio: shutdown with streams attached, the hub, the projection, rendering."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import segno
import trio

from agentrt.errors import AgentrtError
from agentrt.events import EventBatch, Status, TextDelta, ToolResult, ToolUse, TurnCompleted, TurnStarted, Usage
from agentrt.threads import ThreadBrowser, ThreadRecord
from agentrt_web._chat import ChatManager
from agentrt_web._hub import RELOAD, REPLAY, SUBSCRIBER_BUFFER, Hub, sse_frame
from agentrt_web._render import qr_svg, relative_time, render_markdown, title_of
from agentrt_web._server import WebOptions, serve_web
from agentrt_web._websink import WebSink, frame_interval

from .conftest import base_env
from .fixture_web_agent import XSS


async def test_shutdown_is_immediate_with_streams_attached(tmp_path: Path, agent: Path) -> None:
    # hypercorn would wait up to graceful_timeout (60 s here) for open responses:
    # only closing our own streams first lets shutdown finish inside the bound.
    env = base_env(tmp_path, agent)
    stop = trio.Event()
    ended: list[str] = []
    async with trio.open_nursery() as nursery:
        opts = WebOptions(host="127.0.0.1", port=0, graceful_timeout=60.0, supervise_bots=False)
        urls: list[str] = []
        state = await nursery.start(lambda task_status: serve_web(
            opts, env=env, stop=stop, on_ready=urls.extend, task_status=task_status))
        assert urls
        names = [await state.chats.create() for _ in range(10)]  # streams exist only for real threads
        async with httpx.AsyncClient(base_url=urls[0], timeout=10) as client:

            async def listen(i: int, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                async with client.stream("GET", f"/events/threads/{names[i]}") as resp:
                    assert resp.status_code == 200
                    assert resp.headers["content-type"].startswith("text/event-stream")
                    task_status.started()
                    async for _ in resp.aiter_bytes():
                        pass
                ended.append(f"t{i}")

            async with trio.open_nursery() as clients:
                for i in range(10):
                    await clients.start(listen, i)
                assert sum(state.hub.subscribers(f"thread:{n}") for n in names) == 10
                with trio.fail_after(30):  # hang guard
                    stop.set()
                    # Every stream ends cleanly (EOF, not a reset) and the server stops.
    assert sorted(ended) == sorted(f"t{i}" for i in range(10))


async def test_hub_drops_a_subscriber_that_falls_behind() -> None:
    hub = Hub()
    slow = hub.stream(hub.subscribe("x"))
    first = await slow.__anext__()
    assert first.startswith(b"retry:")
    for i in range(SUBSCRIBER_BUFFER + 1):
        hub.publish("x", sse_frame({"i": i}))
    assert hub.dropped == 1 and hub.subscribers("x") == 0
    # What was buffered is still delivered, then the stream ends (the browser reconnects).
    got = b""
    with trio.fail_after(30):
        async for chunk in slow:
            got += chunk
    assert got.count(b"data: ") == SUBSCRIBER_BUFFER
    hub.close()
    after = hub.stream(hub.subscribe("y"))
    assert (await after.__anext__()).startswith(b"retry:")
    with trio.fail_after(30):
        assert [c async for c in after] == []


async def drain(hub: Hub, topic: str, last: str | None) -> bytes:
    stream = hub.stream(hub.subscribe(topic, last))
    head = await stream.__anext__()
    hub.close()
    with trio.fail_after(30):
        return head + b"".join([c async for c in stream])


async def test_hub_replays_what_a_page_missed() -> None:
    hub = Hub()
    hub.publish("t", sse_frame({"n": 1}))
    drawn_at = hub.last_id("t")  # the page is drawn here
    hub.publish("t", sse_frame({"n": 2}))
    hub.publish("t", sse_frame({"n": 3}))
    body = await drain(hub, "t", drawn_at)
    assert b'{"n":1}' not in body and body.index(b'{"n":2}') < body.index(b'{"n":3}')
    assert f"id: {hub.epoch}:3".encode() in body


async def test_hub_asks_for_a_reload_when_it_cannot_replay() -> None:
    hub = Hub()
    for i in range(REPLAY + 5):
        hub.publish("t", sse_frame({"n": i}))
    assert await drain(hub, "t", f"{hub.epoch}:1") == b"retry: 1000\n: open\n\n" + RELOAD  # too far behind
    hub2 = Hub()
    hub2.publish("t", sse_frame({"n": 0}))
    assert (await drain(hub2, "t", "oldepoch:1")).endswith(RELOAD)  # another server run
    hub3 = Hub()
    assert (await drain(hub3, "t", f"{hub3.epoch}:7")).endswith(RELOAD)  # from the future
    hub4 = Hub()
    hub4.publish("t", sse_frame({"n": 0}))
    assert b"data:" not in await drain(hub4, "t", hub4.last_id("t"))  # up to date: nothing to replay


def batch(*events: Any, mono: float = 1.0) -> EventBatch:
    return EventBatch(source="c", first_seq=0, mono=mono, wall=1000.0, events=events)


async def test_projection_carries_labels_not_payloads() -> None:
    hub = Hub()
    sink = WebSink(hub, "t")
    stream = hub.stream(hub.subscribe("thread:t"))
    await stream.__anext__()
    await sink.handle(batch(TurnStarted(turn=1, prompt="go"), mono=1.0))
    await sink.handle(batch(
        ToolUse(id="u1", name="Bash", input={"command": "cat /etc/shadow", "secret": "s3cr3t"},
                summary="Running: cat /etc/shadow"),
        ToolResult(tool_use_id="u1", content="root:x:0:0 s3cr3t", is_error=False),
        Status(kind="rate_limit", label="rate_limited", detail={"resetsAt": 5}),
        TextDelta(text="a"), TextDelta(text="b"), mono=1.5))
    await sink.handle(batch(TurnCompleted(usage=Usage(input_tokens=3, output_tokens=4)), mono=3.25))
    hub.close()
    body = b"".join([c async for c in stream]).decode()
    assert "s3cr3t" not in body and "root:x" not in body
    assert '"label":"Running: cat /etc/shadow"' in body
    assert '"k":"text","text":"ab"' in body  # deltas of one batch are one message
    assert '"label":"Rate limited (resets at 5); waiting"' in body
    assert '"duration":2.25' in body and '"usage":{"input_tokens":3,"output_tokens":4}' in body
    assert sink.terminals == 1


@pytest.mark.parametrize(
    ("pages", "interval"), [(1, 1 / 20), (12, 1 / 20), (25, 1 / 10), (50, 1 / 5), (100, 1 / 4), (1000, 1 / 4)]
)
async def test_text_frames_slow_down_as_pages_multiply(autojump_clock: Any, pages: int, interval: float) -> None:
    assert frame_interval(pages) == pytest.approx(interval)
    hub = Hub()
    subs = [hub.subscribe("thread:t") for _ in range(pages)]
    async with trio.open_nursery() as nursery:
        sink = WebSink(hub, "t", nursery)
        start = trio.current_time()
        await sink.handle(batch(TextDelta(text="first")))  # the first text of a burst: at once
        await sink.handle(batch(TextDelta(text="held")))  # then held for the next frame
        first = await subs[0].receive.receive()
        assert b'"text":"first"' in first and trio.current_time() == start
        second = await subs[0].receive.receive()
        assert b'"text":"held"' in second
        assert trio.current_time() - start == pytest.approx(interval)
        # Every page got both frames, the same bytes (encoded once).
        assert pages == 1 or [subs[-1].receive.receive_nowait(), subs[-1].receive.receive_nowait()] == [first, second]


def test_markdown_rendering_is_inert() -> None:
    html = render_markdown(XSS)
    assert "<script" not in html and "<img" not in html and "onerror=\"" not in html
    assert "javascript:" not in re.findall(r'href="([^"]*)"', html)[0]
    assert re.findall(r'href="([^"]*)"', html) == ["https://example.com/"]
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "<strong>bold</strong>" in html
    assert render_markdown("[x](JaVaScRiPt:alert(1))").count("href") == 0
    assert render_markdown("![i](data:text/html;base64,PHNjcmlwdD4=)").count("src=") == 0
    assert "<table>" in render_markdown("| a |\n|---|\n| b |")


def test_qr_svg_is_segno_rendering() -> None:
    url = "https://liteapp.weixin.qq.com/q/abc?x=1"
    buf = io.BytesIO()
    segno.make_qr(url, error="m").save(buf, kind="svg", scale=6, border=4, dark="#000", light="#fff", xmldecl=True)
    assert qr_svg(url) == buf.getvalue().decode()
    assert qr_svg(url).startswith("<?xml")


def test_small_helpers() -> None:
    assert relative_time(100.0, now=110.0) == "just now"
    assert relative_time(0.0, now=600.0) == "10 min ago"
    assert relative_time(0.0, now=7200.0) == "2 h ago"
    assert relative_time(None) == ""
    assert title_of("first line\nsecond", "n") == "first line"
    assert title_of("", "fallback") == "fallback"
    assert len(title_of("x" * 500, "n")) == 60


def test_status_labels() -> None:
    from agentrt_web._websink import _status_label

    retry = Status(kind="api_retry", label="API error 529, retrying (attempt 2 of 10)")
    assert _status_label(retry) == "Retrying: API error 529, retrying (attempt 2 of 10)"
    assert _status_label(Status(kind="rate_limit", label="rate_limited")) == "Rate limited; waiting"
    long = "Permission denied: " + "x" * 300
    assert _status_label(Status(kind="permission_denied", label=long)) == long[:120]
    # Protocol words never reach the page: known ones in words, others not at all.
    assert _status_label(Status(kind="status", label="requesting")) == "Waiting for the model"
    assert _status_label(Status(kind="status", label="compacting")) == "Compacting the conversation"
    assert _status_label(Status(kind="status", label="")) == ""
    assert _status_label(Status(kind="tool_call_update", label="in_progress")) == ""
    assert _status_label(Status(kind="api_error", label="server_error")) == "The API answered with an error"
    assert _status_label(Status(kind="mode", label="plan")) == "Mode: plan"
    assert _status_label(Status(kind="tool_call_update", label="Reading notes.md")) == "Reading notes.md"


def test_step_text_reads_running_then_how_the_step_ended() -> None:
    from agentrt_web._websink import step_text

    running = {"label": "Running: git status", "subject": "git status", "state": "running"}
    assert step_text(running) == "Running: git status"
    assert step_text({**running, "state": "done"}) == "git status — done"
    assert step_text({**running, "state": "error"}) == "git status — failed"
    assert step_text({"label": "Editing app.py", "state": "stopped"}) == "Editing app.py — stopped"


async def test_step_and_status_labels_show_control_and_bidi_characters_escaped() -> None:
    from agentrt_web._websink import _status_label

    hub = Hub()
    sink = WebSink(hub, "t")
    await sink.handle(batch(TurnStarted(turn=1, prompt="go"), mono=1.0))
    await sink.handle(batch(ToolUse(id="c1", name="read", input={}, summary="Read \x1b[2Kfile\u202etxt.exe"), mono=1.1))
    assert sink.live.steps[0]["label"] == "Running: Read \\x1b[2Kfile\\u202etxt.exe"
    task = Status(kind="task_started", label="Checking \u202eevil\x07 things")
    assert _status_label(task) == "Checking \\u202eevil\\x07 things"
    hub.close()


async def test_words_after_a_tool_call_are_a_paragraph_of_their_own() -> None:
    hub = Hub()
    sink = WebSink(hub, "t")
    stream = hub.stream(hub.subscribe("thread:t"))
    await stream.__anext__()
    await sink.handle(batch(TurnStarted(turn=1, prompt="go"), TextDelta(text="I will run a command."), mono=1.0))
    await sink.handle(batch(ToolUse(id="u1", name="Bash", input={"command": "echo hi"}),
                            ToolResult(tool_use_id="u1", content="hi", is_error=False), mono=1.1))
    await sink.handle(batch(TextDelta(text="The tool "), TextDelta(text="said: hi"), mono=1.2))
    await sink.handle(batch(TextDelta(text=" Done."), TurnCompleted(), mono=1.3))
    hub.close()
    body = b"".join([c async for c in stream]).decode()
    assert '"text":"\\n\\nThe tool said: hi"' in body and '"text":" Done."' in body
    assert "<p>I will run a command.</p>\\n<p>The tool said: hi Done.</p>" in body


async def test_a_step_under_an_agents_own_title_says_it_is_running() -> None:
    # ACP agents title their calls themselves ("Read file"): the running step says what it is doing.
    hub = Hub()
    sink = WebSink(hub, "t")
    await sink.handle(batch(TurnStarted(turn=1, prompt="go"), mono=1.0))
    await sink.handle(batch(ToolUse(id="c1", name="read", input={}, summary="Read file"),
                            ToolUse(id="c2", name="edit", input={}, summary="Editing notes.md"), mono=1.1))
    assert [(s["label"], s["subject"]) for s in sink.live.steps] == [
        ("Running: Read file", "Read file"), ("Editing notes.md", "Editing notes.md")]
    hub.close()


class _PlainStore:
    """A thread store with only the ThreadStore methods (no listing, history or deletion)."""

    def __init__(self) -> None:
        self.records: dict[str, ThreadRecord] = {}

    async def get_thread(self, name: str) -> ThreadRecord | None:
        return self.records.get(name)

    async def save_thread(self, record: ThreadRecord) -> None:
        self.records[record.name] = record


async def test_chat_uses_the_browsing_protocol_only_when_the_store_offers_it(tmp_path: Path) -> None:
    from agentrt_sqlite.api import SqliteStore

    sqlite_store = SqliteStore(tmp_path / "a.db")
    assert isinstance(sqlite_store, ThreadBrowser)
    assert not isinstance(_PlainStore(), ThreadBrowser)
    plain = _PlainStore()
    await plain.save_thread(ThreadRecord(name="t1", dialect="awp-jsonl", executable="/bin/true"))
    async with trio.open_nursery() as nursery:
        for store, listed in ((plain, []), (sqlite_store, ["t1"])):
            if store is sqlite_store:
                await store.save_thread(ThreadRecord(name="t1", dialect="awp-jsonl", executable="/bin/true"))
            chats = ChatManager(nursery, plugins=None, env={}, hub=Hub(), store=store, launch=None)
            assert [t["name"] for t in await chats.list_threads()] == listed
            assert await chats.turns("t1") == []
            if store is plain:
                with pytest.raises(AgentrtError) as info:
                    await chats.delete("t1")
                assert info.value.code == "thread_delete_unsupported"
            else:
                assert await chats.delete("t1") is True
                assert await chats.list_threads() == []
    await sqlite_store.aclose()


async def test_a_streams_frames_skip_the_layers_between_the_wall_and_the_server() -> None:
    """Each frame is a send per page: only the response start goes through the layers (headers added there)."""
    from agentrt_web._security import SecurityMiddleware
    from agentrt_web._sessions import Sessions
    from agentrt_web._sse import SSEResponse

    async def body() -> Any:
        for n in range(3):
            yield b"data: %d\n\n" % n

    layer: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async def layered(message: Any) -> None:  # what starlette's middlewares do to ``send``
            layer.append(message["type"])
            await send(message)

        await SSEResponse(body())(scope, receive, layered)

    server: list[Any] = []

    async def send(message: Any) -> None:
        server.append(message)

    async def receive() -> Any:
        await trio.sleep_forever()

    wall = SecurityMiddleware(app, sessions=Sessions(), token=None, loopback_only=True)
    scope = {"type": "http", "method": "GET", "path": "/events/bots", "headers": [(b"host", b"127.0.0.1:1")]}
    await wall(scope, receive, send)
    assert layer == ["http.response.start"]
    assert [m["type"] for m in server] == ["http.response.start"] + ["http.response.body"] * 4
    assert b"".join(m["body"] for m in server[1:]) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert server[-1]["more_body"] is False
    headers = dict(server[0]["headers"])
    assert headers[b"content-type"].startswith(b"text/event-stream") and b"content-security-policy" in headers
