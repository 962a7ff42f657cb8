"""The chat in a real browser: Debian's chromium, driven by Playwright, against ``agentrt web``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .conftest import LLM_SECRET, Chat, agent_pids, alive, argv_log, base_env, last_assistant, new_thread, say
from .conftest import shot as shot  # (other modules of these tests import it from here)


def watch_stream(page: Any) -> None:
    """Record every distinct text the streaming bubble shows (Playwright's evaluate is not inline script)."""
    page.evaluate(
        """() => {
          window.__seen = [];
          new MutationObserver(() => {
            const s = document.querySelector('.msg.assistant.streaming .reply');
            if (s && window.__seen[window.__seen.length - 1] !== s.textContent) window.__seen.push(s.textContent);
          }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
        }"""
    )


def test_reply_streams_token_by_token(chat: Chat) -> None:
    page = chat.page
    watch_stream(page)
    say(page, "slow 8")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    final = last_assistant(page).locator(".reply").inner_text().strip()
    assert final == "w0 w1 w2 w3 w4 w5 w6 w7"
    seen: list[str] = page.evaluate("window.__seen")
    partial = [s for s in seen if s.strip() and s.strip() != final]
    # Intermediate text was in the DOM before the reply was complete, in order.
    assert len(partial) >= 3, seen
    assert all(final.startswith(p.strip()) for p in partial)
    # The new thread's sidebar entry took its title from the first message, live.
    assert page.locator("#thread-list li.current .title").inner_text() == "slow 8"
    meta = last_assistant(page).locator(".meta").inner_text()
    assert "7 in" in meta and " s" in meta  # usage and duration of the turn


def test_stop_cancels_the_turn_not_the_thread(tmp_path: Path, chat: Chat) -> None:
    page = chat.page
    say(page, "hang")
    page.wait_for_function("() => (document.querySelector('.msg.assistant.streaming .reply')||{}).textContent"
                           "?.includes('tick2')")
    assert page.locator("#stop").is_visible()
    page.click("#stop")
    page.wait_for_selector(".msg.assistant .stopped")
    assert page.locator("#stop").is_hidden()
    # The thread goes on: the next turn runs on a new process resuming the same session.
    say(page, "still there?")
    page.wait_for_selector("text=echo: still there?")
    starts = argv_log(tmp_path)
    assert len(starts) == 2 and "--resume" not in starts[0]
    assert starts[1][starts[1].index("--resume") + 1].startswith("webfix-")


def test_tool_step_and_rate_limit_status(chat: Chat) -> None:
    page = chat.page
    say(page, "tool")
    step = page.locator(".steps li").first
    step.wait_for()
    assert step.inner_text() == "Running: ls -la /secret/place"  # the bounded label, not the payload
    page.wait_for_selector(".steps li.done")
    page.wait_for_selector("text=The directory has two files.")
    assert "file-a" not in page.content()  # tool output never reaches the page
    say(page, "rate")
    page.wait_for_function("() => [...document.querySelectorAll('.status')].some(s => "
                           "s.textContent.startsWith('Rate limited'))")
    page.wait_for_selector("text=after the rate limit")
    say(page, "xss")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply strong")


def test_error_bubble_with_code_and_retry(chat: Chat) -> None:
    page = chat.page
    say(page, "fail")
    bubble = page.locator(".error-bubble").first
    bubble.wait_for()
    assert bubble.locator("code").inner_text() == "fixture_failure"
    assert "the fixture failed on purpose" in bubble.inner_text()
    bubble.locator("button.retry").click()
    page.wait_for_function("() => document.querySelectorAll('.error-bubble').length === 2")
    # After a reload the history shows the failed turns from the database, still with their code.
    page.reload()
    page.wait_for_selector(".error-bubble code")
    assert page.locator(".error-bubble code").all_inner_texts() == ["fixture_failure", "fixture_failure"]
    # And their message, from the turn rows (no replay of the thread's transcripts for it).
    assert all("the fixture failed on purpose" in t for t in page.locator(".error-bubble").all_inner_texts())


def test_agent_markup_never_runs(chat: Chat) -> None:
    page = chat.page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    say(page, "xss")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply strong")

    def check() -> None:
        assert page.evaluate("window.__pwned") is None
        reply = last_assistant(page).locator(".reply")
        assert reply.locator("script").count() == 0
        assert reply.locator("img").count() == 0
        hrefs = reply.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert hrefs == ["https://example.com/"]
        assert "<script>window.__pwned = 1</script>" in reply.inner_text()  # shown as text

    check()
    page.reload()  # the server-rendered history is as safe as the live view
    page.wait_for_selector(".reply strong")
    check()
    assert dialogs == []


def test_thread_switch_and_resume_across_restart(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    env = base_env(tmp_path, agent)
    srv = server_factory(env)
    page = browser.new_page()
    a = new_thread(page, srv.url)
    say(page, "hello from A")
    page.wait_for_selector("text=echo: hello from A")
    b = new_thread(page, srv.url)
    say(page, "hello from B")
    page.wait_for_selector("text=echo: hello from B")
    # Switch back to A from the sidebar: its history, not B's.
    page.click(f'#thread-list li[data-name="{a}"] a')
    page.wait_for_url(f"**/threads/{a}")
    assert page.locator("text=echo: hello from A").count() == 1
    assert page.locator("text=echo: hello from B").count() == 0
    # Search filters the sidebar.
    page.fill("#thread-search", "from b")
    assert page.locator(f'#thread-list li[data-name="{a}"]').is_hidden()
    assert page.locator(f'#thread-list li[data-name="{b}"]').is_visible()
    pids = agent_pids(tmp_path)
    assert len(pids) == 2 and all(alive(p) for p in pids)  # one live process per open thread
    assert srv.stop() == 143  # SIGTERM: bounded stop, then 128 + 15
    assert not any(alive(p) for p in pids)  # stopping the server stopped (and reaped) its agents

    with sqlite3.connect(tmp_path / "agentrt.db") as db:
        session_a = db.execute("SELECT session_id FROM threads WHERE name = ?", (a,)).fetchone()[0]
    assert session_a and session_a.startswith("webfix-")

    srv2 = server_factory(env)
    page.goto(f"{srv2.url}/threads/{a}")
    assert page.locator("text=echo: hello from A").count() == 1  # history from the database
    say(page, "back again")
    page.wait_for_selector("text=echo: back again")
    last = argv_log(tmp_path)[-1]
    assert last[last.index("--resume") + 1] == session_a
    assert LLM_SECRET not in page.content()


def test_delete_thread(tmp_path: Path, chat: Chat) -> None:
    page, srv = chat.page, chat.server
    name = chat.thread
    page.on("dialog", lambda d: d.accept())
    say(page, "keep me briefly")
    page.wait_for_selector("text=echo: keep me briefly")
    page.click(f'#thread-list li[data-name="{name}"] button.delete')
    page.wait_for_url(srv.url + "/")
    assert page.locator(f'#thread-list li[data-name="{name}"]').count() == 0
    with sqlite3.connect(tmp_path / "agentrt.db") as db:
        assert db.execute("SELECT count(*) FROM threads WHERE name = ?", (name,)).fetchone()[0] == 0


def test_page_opened_mid_reply_misses_nothing(browser: Any, chat: Chat) -> None:
    page, srv = chat.page, chat.server
    name = chat.thread
    say(page, "slow 20")
    page.wait_for_function("() => (document.querySelector('.msg.assistant.streaming .reply')||{}).textContent"
                           "?.includes('w3')")
    # Another tab opens the thread mid-reply, and this one reloads mid-reply: both end with
    # exactly the reply (the page draws the turn so far; the stream replays what came after).
    other = browser.new_page()
    other.goto(f"{srv.url}/threads/{name}")
    page.reload()
    expected = " ".join(f"w{i}" for i in range(20))
    for p in (page, other):
        p.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
        assert last_assistant(p).locator(".reply").inner_text().strip() == expected
        assert p.locator(".msg.assistant").count() == 1, p.locator("#messages").inner_html()
