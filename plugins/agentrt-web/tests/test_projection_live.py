"""The live projection in-process: Markdown frames while a reply streams, tool steps by id, closed at the end."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import trio

from agentrt.events import TextDelta, ToolUse, TurnCompleted, TurnFailed, TurnStarted
from agentrt_web._hub import Hub
from agentrt_web._render import utf16_len
from agentrt_web._websink import MD_INTERVAL, WebSink

from .test_server import batch


def messages(frame: bytes) -> list[dict[str, Any]]:
    data = frame.split(b"data: ", 1)[1]
    return list(orjson.loads(data)["m"])


async def test_markdown_frames_while_streaming(autojump_clock: Any) -> None:
    hub = Hub()
    sub = hub.subscribe("thread:t")
    async with trio.open_nursery() as nursery:
        sink = WebSink(hub, "t", nursery)
        await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
        start = trio.current_time()
        await sink.handle(batch(TextDelta(text="**bold** 🙂 and ")))
        await sink.handle(batch(TextDelta(text="<script>x</script> more")))
        got: list[dict[str, Any]] = []
        while not any(m["k"] == "md" for m in got):
            got += messages(await sub.receive.receive())
        # The first words went out as text at once; the rendering followed one interval later.
        assert trio.current_time() - start >= MD_INTERVAL
        md = next(m for m in got if m["k"] == "md")
        text = "**bold** 🙂 and <script>x</script> more"
        assert md["html"] == "<p><strong>bold</strong> 🙂 and &lt;script&gt;x&lt;/script&gt; more</p>\n"
        assert md["n"] == utf16_len(text) == len(text) + 1  # the emoji is two code units in a page
        assert "".join(m["text"] for m in got if m["k"] == "text") == text
        # Nothing more to render: no frame until the next text.
        with trio.move_on_after(10 * MD_INTERVAL):
            await sub.receive.receive()
            raise AssertionError("a rendering without new text")
        await sink.handle(batch(TurnCompleted()))
        done = messages(await sub.receive.receive())
        assert done[-1]["k"] == "done" and "<strong>bold</strong>" in done[-1]["html"]


async def test_no_markdown_frame_after_the_turn_ended(autojump_clock: Any) -> None:
    hub = Hub()
    sub = hub.subscribe("thread:t")
    async with trio.open_nursery() as nursery:
        sink = WebSink(hub, "t", nursery)
        await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
        await sink.handle(batch(TextDelta(text="short"), TurnCompleted()))
        await trio.sleep(10 * MD_INTERVAL)
        kinds = []
        while True:
            try:
                kinds += [m["k"] for m in messages(sub.receive.receive_nowait())]
            except trio.WouldBlock:
                break
        assert kinds == ["turn_started", "text", "done"]


async def test_tool_steps_are_one_per_call_and_close_with_the_turn() -> None:
    hub = Hub()
    sub = hub.subscribe("thread:t")
    sink = WebSink(hub, "t")
    await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
    await sink.handle(batch(ToolUse(id="u1", name="Bash", input={}, summary="Running command")))
    await sink.handle(batch(ToolUse(id="u1", name="Bash", input={"command": "git status"})))  # no summary
    await sink.handle(batch(ToolUse(id="u2", name="mcp__fs__Read", input={"file_path": "/a/b/notes.md"})))
    assert [(s["id"], s["label"]) for s in sink.live.steps] == [("u1", "Running: git status"),
                                                                 ("u2", "Reading notes.md")]
    await sink.handle(batch(TurnFailed(code="exit_before_result", message="the agent exited (status 1)")))
    frames = []
    while True:
        try:
            frames += messages(sub.receive.receive_nowait())
        except trio.WouldBlock:
            break
    tools = [m for m in frames if m["k"] == "tool"]
    assert [m["label"] for m in tools] == ["Running command", "Running: git status", "Reading notes.md"]
    end = frames[-1]
    assert end["k"] == "failed" and end["steps"] == ["u1", "u2"] and end["step_state"] == "stopped"
    assert end["message"] == "the agent exited (status 1)"


async def test_no_rendering_while_no_page_watches(autojump_clock: Any) -> None:
    hub = Hub()
    async with trio.open_nursery() as nursery:
        sink = WebSink(hub, "t", nursery)
        await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
        await sink.handle(batch(TextDelta(text="**nobody** reads this")))
        await trio.sleep(10 * MD_INTERVAL)
        assert hub.last_id("thread:t").endswith(":2")  # turn_started and text: no md frame
        sub = hub.subscribe("thread:t", hub.last_id("thread:t"))
        await sink.handle(batch(TextDelta(text=" yet")))
        got: list[dict[str, Any]] = []
        while not any(m["k"] == "md" for m in got):
            got += messages(await sub.receive.receive())
        assert got[-1]["html"] == "<p><strong>nobody</strong> reads this yet</p>\n"


async def test_markdown_frames_keep_to_a_byte_budget_with_many_pages(autojump_clock: Any) -> None:
    """Each rendering is the whole reply so far, sent to every page: 50 pages of a long reply get fewer."""
    from agentrt_web._websink import MD_BUDGET

    hub = Hub()
    pages = [hub.subscribe("thread:t") for _ in range(50)]
    md_times: list[float] = []
    sizes: list[int] = []

    async def read(sub: Any, first: bool) -> None:
        async for frame in sub.receive:
            for m in messages(frame):
                if first and m["k"] == "md":
                    md_times.append(trio.current_time())
                    sizes.append(len(m["html"].encode()))

    async with trio.open_nursery() as nursery:
        for n, sub in enumerate(pages):
            nursery.start_soon(read, sub, n == 0)
        sink = WebSink(hub, "t", nursery)
        await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
        for _ in range(400):  # 100,000 characters over 4 s of the model's time
            await sink.handle(batch(TextDelta(text="x" * 250)))
            await trio.sleep(0.01)
        await sink.handle(batch(TurnCompleted()))
        await trio.sleep(10 * MD_INTERVAL)
        nursery.cancel_scope.cancel()
    assert len(md_times) >= 2
    # The pause after each rendering lets its bytes, to every page, fit the budget (was MD_INTERVAL whatever the size).
    for (at, size), later in zip(zip(md_times, sizes), md_times[1:]):
        assert later - at >= max(MD_INTERVAL, size * 50 / MD_BUDGET) * 0.99, (at, later, size)
    assert sum(sizes) * 50 <= MD_BUDGET * (md_times[-1] - md_times[0]) + sizes[-1] * 50


async def test_a_rendering_rides_the_next_text_frame(autojump_clock: Any) -> None:
    """While text streams, the live Markdown goes out in a text frame: one write per page for both, text first."""
    hub = Hub()
    sub = hub.subscribe("thread:t")
    frames: list[list[dict[str, Any]]] = []

    async def read() -> None:
        async for frame in sub.receive:
            frames.append(messages(frame))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        sink = WebSink(hub, "t", nursery)
        await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
        for n in range(200):  # 2 s of words, one every 10 ms: text is always waiting for its frame
            await sink.handle(batch(TextDelta(text=f"w{n} ")))
            await trio.sleep(0.01)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    rendered = [f for f in frames if any(m["k"] == "md" for m in f)]
    assert len(rendered) >= 4
    # No frame of a rendering alone while words come: each carries the text held for it, before it.
    # (The last may go alone: the words had ended, nothing was held for it.)
    assert all([m["k"] for m in f] == ["text", "md"] for f in rendered[:-1]), [[m["k"] for m in f] for f in frames]
    assert rendered[-1][-1]["n"] == utf16_len("".join(f"w{n} " for n in range(200)))
    sent = ""
    for f in frames:
        for m in f:
            if m["k"] == "text":
                sent += m["text"]
            elif m["k"] == "md":
                assert m["n"] <= utf16_len(sent)  # a rendering covers only text the page has
    assert sent == "".join(f"w{n} " for n in range(200))


async def _frame_gaps(
    autojump_clock: Any, cpu_share: float, deltas: int, frames: int = 6
) -> list[float]:
    """Gaps between the text frames 50 pages get while batches of ``deltas`` deltas come every 10 ms
    and the server gets ``cpu_share`` of a core."""
    hub = Hub()
    subs = [hub.subscribe("thread:t") for _ in range(50)]
    times: list[float] = []
    async with trio.open_nursery() as nursery:
        sink = WebSink(hub, "t", nursery)
        sink.cpu_clock = lambda: trio.current_time() * cpu_share
        await sink.handle(batch(TurnStarted(turn=1, prompt="go")))
        await trio.sleep(10)  # (the last frame long ago: the first text goes at once)

        async def feed() -> None:
            while True:
                await sink.handle(batch(*[TextDelta(text="x")] * deltas))
                await trio.sleep(0.01)

        nursery.start_soon(feed)
        while len(times) < frames:
            frame = await subs[0].receive.receive()
            if b'"k":"text"' in frame:
                times.append(trio.current_time())
        nursery.cancel_scope.cancel()
    return [b - a for a, b in itertools.pairwise(times)]


async def test_bulk_text_waits_for_the_servers_cpu(autojump_clock: Any) -> None:
    """Text in bulk, a server getting half a core: one frame per interval of its CPU (twice the interval)."""
    from agentrt_web._websink import BULK_DELTAS, frame_interval

    interval = frame_interval(50)
    gaps = await _frame_gaps(autojump_clock, 0.5, BULK_DELTAS + 44)
    assert all(abs(g - 2 * interval) < 0.005 for g in gaps[1:]), gaps
    # A server with the whole core: the clock's interval.
    gaps = await _frame_gaps(autojump_clock, 1.0, BULK_DELTAS + 44)
    assert all(abs(g - interval) < 0.005 for g in gaps[1:]), gaps


async def test_bulk_text_waits_at_most_a_few_intervals(autojump_clock: Any) -> None:
    from agentrt_web._websink import BULK_DELTAS, BULK_HOLD, frame_interval

    gaps = await _frame_gaps(autojump_clock, 0.0, BULK_DELTAS + 44)
    assert all(abs(g - BULK_HOLD * frame_interval(50)) < 0.005 for g in gaps[1:]), gaps


async def test_words_at_a_models_pace_go_by_the_clock(autojump_clock: Any) -> None:
    """A few deltas a frame (a model writing words): the clock's interval, whatever the server's CPU."""
    from agentrt_web._websink import frame_interval

    gaps = await _frame_gaps(autojump_clock, 0.0, 1)
    assert all(abs(g - frame_interval(50)) < 0.005 for g in gaps[1:]), gaps
