"""A 50 MB reply in a web thread: the page shows a bounded first part, the rest is reachable part by part.

The reply is recorded by the real database sink (50 MB of text deltas, the
turn row clipped as usual) before a real ``agentrt web`` opens that database;
the pages are fetched over loopback HTTP, and the server's peak RSS (its
``VmHWM``) is read from /proc around the requests; then a real browser
(Debian's chromium through Playwright) follows the links through a shorter one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import trio

from agentrt.events import EventBatch, TextDelta, TurnCompleted, TurnStarted
from agentrt_sqlite.api import ConversationInfo, SqliteSink

from .conftest import base_env

PART = 100_000
CHUNKS = 500  # of 100,000 characters: a 50 MB reply
NAME = "web-20261204-150000-0a1b2c"  # a generated name: its title is read from the first turn


def _chunk(i: int) -> str:
    # Each chunk starts with its own marker; lines keep the Markdown renderer on its fast path.
    line = "lorem ipsum dolor sit amet " * 3 + "\n"
    head = f"CHUNK-{i:04d}\n"
    body = (line * (PART // len(line) + 1))[: PART - len(head)]
    return head + body


async def _record(db: Path, chunks: int = CHUNKS) -> str:
    sink = SqliteSink(db, info=ConversationInfo(thread=NAME, dialect="awp-jsonl", executable="/bin/true"))
    source = "c0ffee00-0000-4000-8000-000000000001"
    seq = 0
    await sink.handle(EventBatch(source=source, first_seq=seq, mono=0.0, wall=1000.0,
                                 events=(TurnStarted(turn=1, prompt="write a lot"),)))
    for i in range(chunks):
        seq += 1
        await sink.handle(EventBatch(source=source, first_seq=seq, mono=1.0, wall=1001.0,
                                     events=(TextDelta(text=_chunk(i), index=0),)))
    await sink.handle(EventBatch(source=source, first_seq=seq + 1, mono=2.0, wall=1002.0,
                                 events=(TurnCompleted(result="done"),)))
    await sink.aclose()
    return source


def _hwm_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match.group(1))


def _server_pid(srv: Any) -> int:
    # The server is the `agentrt web` process itself (no wrapper).
    assert srv.proc is not None
    return int(srv.proc.pid)


def test_a_50_mb_reply_pages_in_bounded_parts(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    db = tmp_path / "agentrt.db"
    source = trio.run(_record, db)
    srv = server_factory(base_env(tmp_path, agent))
    pid = _server_pid(srv)
    with httpx.Client(base_url=srv.url, timeout=120) as c:
        # The first page of this server: the thread list (its title from the first turn) and the thread.
        before = _hwm_kib(pid)
        page = c.get(f"/threads/{NAME}", headers={"accept": "text/html"})
        grown_mib = (_hwm_kib(pid) - before) / 1024
        assert page.status_code == 200
        html = page.text
        # The first part only: its first chunk, not the second, and a link to the rest.
        assert "CHUNK-0000" in html and "CHUNK-0001" not in html
        assert len(page.content) < 2 * PART + 200_000, len(page.content)
        links = re.findall(rf'href="(/threads/{NAME}/replies/[^"]+)"', html)
        assert links == [f"/threads/{NAME}/replies/{source}/1?offset={PART}"], links
        # Bounded memory for the request (the whole reply read and rendered took ~260 MB).
        assert grown_mib < 40, grown_mib

        # The next part starts where the first ended, and links on.
        second = c.get(links[0].replace("&amp;", "&"), headers={"accept": "text/html"})
        assert second.status_code == 200 and "CHUNK-0001" in second.text and "CHUNK-0002" not in second.text
        assert f"offset={2 * PART}" in second.text and 'rel="prev"' in second.text
        # Any part is reachable directly; the last one says so and links no further.
        middle = c.get(f"/threads/{NAME}/replies/{source}/1?offset={250 * PART}")
        assert "CHUNK-0250" in middle.text and "CHUNK-0249" not in middle.text
        last = c.get(f"/threads/{NAME}/replies/{source}/1?offset={(CHUNKS - 1) * PART}")
        assert "CHUNK-0499" in last.text and "the last part" in last.text and 'rel="next"' not in last.text
        assert (_hwm_kib(pid) - before) / 1024 < 40
        # A turn that is not this thread's, or a bad offset, is a plain not-found page.
        for bad in (f"/threads/{NAME}/replies/{source}/2", f"/threads/{NAME}/replies/other/1",
                    f"/threads/{NAME}/replies/{source}/1?offset=-5", f"/threads/{NAME}/replies/{source}/1?offset=x",
                    f"/threads/{NAME}/replies/{source}/1?offset={1 << 70}"):
            assert c.get(bad, headers={"accept": "text/html"}).status_code == 404, bad
    srv.stop()


def test_the_rest_of_a_long_reply_is_a_click_away_in_a_browser(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    source = trio.run(_record, tmp_path / "agentrt.db", 3)
    srv = server_factory(base_env(tmp_path, agent))
    page = browser.new_page()
    page.goto(f"{srv.url}/threads/{NAME}")
    reply = page.locator(".msg.assistant .bubble.reply").first
    assert "CHUNK-0000" in reply.inner_text() and "CHUNK-0001" not in page.content()
    page.get_by_role("link", name="This reply goes on: show the rest, part by part").click()
    page.wait_for_url(f"**/replies/{source}/1?offset={PART}")
    assert "CHUNK-0001" in page.locator(".bubble.reply").inner_text()
    page.get_by_role("link", name="Next part").click()
    page.wait_for_url(f"**?offset={2 * PART}")
    assert "CHUNK-0002" in page.locator(".bubble.reply").inner_text()
    assert "the last part" in page.locator(".part-nav").first.inner_text()
    assert page.get_by_role("link", name="Next part").count() == 0
    page.get_by_role("link", name="Previous part").click()
    page.wait_for_url(f"**?offset={PART}")
    assert "CHUNK-0001" in page.locator(".bubble.reply").inner_text()
    page.get_by_role("link", name="Back to the thread").first.click()
    page.wait_for_url(f"**/threads/{NAME}")
    assert "CHUNK-0000" in page.locator(".msg.assistant .bubble.reply").first.inner_text()
    srv.stop()
