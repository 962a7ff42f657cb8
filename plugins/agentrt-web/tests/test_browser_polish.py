"""The chat page's finish, in a real browser (Debian's chromium through Playwright) against ``agentrt web``.

Markdown while a reply streams, following the reply only from the bottom, a phone-sized
screen, tool steps that close with their turn, error messages, the agent and model in the
header, Copy and Regenerate, Esc, the 404 page and renaming a thread.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .conftest import Chat, argv_log, base_env, last_assistant, new_thread, say, shot

STREAMING = ".msg.assistant.streaming .reply"


def reply_has(page: Any, text: str) -> None:
    """Wait until the streaming reply shows ``text``."""
    page.wait_for_function(
        "t => (document.querySelector('.msg.assistant.streaming .reply') || {}).textContent?.includes(t)", arg=text)


def test_markdown_renders_while_streaming_and_stays_inert(chat: Chat) -> None:
    page = chat.page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    say(page, "mdstream")
    # Before the turn ends, the reply so far is already Markdown: bold, a numbered list, code.
    page.wait_for_selector(f"{STREAMING} strong")
    page.wait_for_selector(f"{STREAMING} ol li code")
    reply_has(page, "tick3")
    page.wait_for_selector(f"{STREAMING} .rendered a")  # a rendering that covers the links
    reply = page.locator(STREAMING)
    assert reply.locator("strong").first.inner_text() == "plan"
    # The injection attempts in the stream are text and dead links, never markup that runs.
    assert reply.locator("script").count() == 0
    hrefs = reply.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs == ["https://example.com/"]
    assert "<script>window.__pwned = 5</script>" in reply.inner_text()
    # The text after the last rendering continues its paragraph, in order, without a gap or a repeat.
    text = " ".join(reply.inner_text().split())
    assert "Progress: tick0 tick1 tick2 tick3" in text, text
    assert text.count("tick1 ") == 1
    # Esc stops the turn (focus anywhere on the page).
    page.locator("#messages").click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.wait_for_selector(".msg.assistant .stopped")
    assert page.locator("#stop").is_hidden()
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_no_jump_to_the_bottom_while_reading_above(chat: Chat) -> None:
    page = chat.page
    say(page, "story")
    reply_has(page, "tick2")
    gap = ("() => { const m = document.getElementById('messages');"
           " return m.scrollHeight - m.scrollTop - m.clientHeight; }")
    assert page.evaluate("() => { const m = document.getElementById('messages');"
                         " return m.scrollHeight > 2 * m.clientHeight; }")
    page.wait_for_function(f"() => ({gap})() < 2")  # at the bottom, the page follows the reply
    # The reader scrolls up: new text keeps arriving, the view stays where the reader put it.
    page.locator("#messages").hover()
    page.mouse.wheel(0, -100_000)
    page.wait_for_function("() => document.getElementById('messages').scrollTop === 0")
    top = 0
    seen = page.locator(STREAMING).inner_text().count("tick")
    reply_has(page, f"tick{seen + 5}")
    assert page.evaluate("document.getElementById('messages').scrollTop") == top
    # Back at the bottom, it follows again.
    page.mouse.wheel(0, 100_000)
    page.wait_for_function(f"() => ({gap})() < 2")
    seen = page.locator(STREAMING).inner_text().count("tick")
    reply_has(page, f"tick{seen + 5}")
    assert page.evaluate(gap) < 40
    page.keyboard.press("Escape")
    page.wait_for_selector(".msg.assistant .stopped")


def test_usable_at_390_px(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent, AWP_AGENT_DEFAULT_MODEL="claude-sonnet-4-5"))
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    no_sideways = "() => document.documentElement.scrollWidth <= window.innerWidth"

    def inside(selector: str) -> None:
        box = page.locator(selector).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (selector, box)
        assert box["y"] >= 0 and box["y"] + box["height"] <= 844, (selector, box)

    page.goto(srv.url + "/")
    assert page.evaluate(no_sideways)
    inside("#new-thread")  # with no thread open, the list is the page
    page.click("#new-thread")
    page.wait_for_url("**/threads/*")
    for selector in ("#prompt", "#send", "#toggle-threads", "#agent-info"):
        inside(selector)
    assert page.locator("#thread-list").is_hidden()  # the list is a drawer here
    say(page, "Why does the CI job fail on Python 3.12?")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply pre")
    assert page.evaluate(no_sideways)  # long code lines scroll inside their block, not the page
    inside("#send")
    page.click("#toggle-threads")
    page.wait_for_selector("#thread-list li.current")
    inside("#thread-list li.current .delete")
    inside("#new-thread")
    assert page.evaluate(no_sideways)
    page.click("#toggle-threads")
    assert page.locator("#thread-list").is_hidden()


def test_tool_steps_close_with_the_turn_under_their_own_label(chat: Chat) -> None:
    page = chat.page
    say(page, "toolopen")
    page.wait_for_selector("text=Nothing to commit.")
    page.wait_for_selector(".msg.assistant:not(.streaming)")
    steps = last_assistant(page).locator(".steps li")
    # Announced before its input, then relabelled once the input came: one step, the tool's label
    # (closed, it reads what it was about and how it ended).
    assert steps.all_inner_texts() == ["git status --short — done"]
    # No result ever came, and the turn ended: the step is closed, not left spinning.
    assert steps.first.get_attribute("class") == "step done"
    assert page.locator(".steps li.running").count() == 0


def test_error_shows_its_message_live_and_after_reload(chat: Chat) -> None:
    page = chat.page
    say(page, "fail")
    bubble = page.locator(".error-bubble").first
    bubble.wait_for()
    assert bubble.locator(".error-message").inner_text() == "the fixture failed on purpose"
    page.reload()
    page.wait_for_selector(".error-bubble code")
    assert page.locator(".error-bubble code").inner_text() == "fixture_failure"
    assert page.locator(".error-bubble .error-message").inner_text() == "the fixture failed on purpose"


def test_header_names_the_agent_and_model(chat: Chat) -> None:
    page = chat.page
    assert page.locator("#agent-info .agent").inner_text() == "web-agent"  # the executable's name
    assert page.locator("#agent-model").inner_text() == "default model"
    say(page, "hello")
    page.wait_for_selector("text=echo: hello")
    assert page.locator("#agent-model").inner_text() == "fixture-web"  # as the agent reported it, live
    page.reload()
    assert page.locator("#agent-model").inner_text() == "fixture-web"  # and remembered with the thread


def test_copy_and_regenerate(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=srv.url)
    page = browser.new_page()
    new_thread(page, srv.url)
    say(page, "Summarise the open pull requests")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply table")
    say(page, "hello there")
    page.wait_for_selector("text=echo: hello there")
    first, second = page.locator(".msg.assistant").all()
    # Regenerate is offered under the last reply only.
    assert first.locator(".regenerate").is_hidden() and second.locator(".regenerate").is_visible()
    first.locator("button.copy").click()
    page.wait_for_function("() => document.querySelector('.msg.assistant button.copy').textContent === 'Copied'")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("There are three open pull requests:")
    assert "Retry uploads on 503" in copied and "#212 can be merged once its checks pass." in copied
    # Regenerate sends the last prompt again, as a new turn.
    second.locator(".regenerate").click()
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming)').length === 3")
    assert page.locator(".msg.user .bubble").all_inner_texts()[-1] == "hello there"
    assert last_assistant(page).locator(".reply").inner_text().strip() == "echo: hello there"
    # The server reloads the same controls from the database.
    page.reload()
    assert page.locator(".msg.assistant button.copy").count() == 3
    assert page.locator(".msg.assistant .regenerate:visible").count() == 1


def test_readable_404(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    page = browser.new_page()
    for path in ("/no/such/page", "/threads/no-such-thread"):
        res = page.goto(srv.url + path)
        assert res is not None and res.status == 404
        assert page.locator("h1").inner_text() == "Page not found"
        page.locator("a.button", has_text="Back to your threads").wait_for()
    assert "deleted or renamed" in page.content()
    page.click("text=Back to your threads")
    page.wait_for_selector("#new-thread")
    # API and stream paths answer JSON with a stable code.
    for path in ("/api/nothing", "/events/nothing", "/static/missing.js"):
        try:
            urllib.request.urlopen(srv.url + path, timeout=30)
            raise AssertionError(f"{path} did not fail")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
            assert json.loads(exc.read())["error"]["code"] == "not_found"


def test_rename_a_thread(tmp_path: Path, chat: Chat) -> None:
    page = chat.page
    old = chat.thread
    say(page, "remember the number 42")
    page.wait_for_selector("text=echo: remember the number 42")
    # A name the web UI cannot use is refused with its reason; the thread keeps its name.
    answers = ["release notes!", "release-notes"]

    def on_dialog(d: Any) -> None:
        d.accept(answers.pop(0)) if d.type == "prompt" else d.accept()

    page.on("dialog", on_dialog)
    with page.expect_event("dialog", predicate=lambda d: d.type == "alert") as alert:
        page.click(f'#thread-list li[data-name="{old}"] button.rename')
    assert "thread names are 1-64" in alert.value.message
    assert page.url.endswith(f"/threads/{old}")
    page.click(f'#thread-list li[data-name="{old}"] button.rename')
    page.wait_for_url("**/threads/release-notes")
    assert page.locator("#thread-list li.current .title").inner_text() == "release-notes"
    assert page.locator("text=echo: remember the number 42").count() == 1  # the history came along
    with sqlite3.connect(tmp_path / "agentrt.db") as db:
        names = [r[0] for r in db.execute("SELECT name FROM threads")]
    assert names == ["release-notes"]
    # The conversation goes on under the new name, resuming the same native session.
    say(page, "what was the number?")
    page.wait_for_selector("text=echo: what was the number?")
    starts = argv_log(tmp_path)
    assert len(starts) == 2
    assert starts[1][starts[1].index("--resume") + 1].startswith("webfix-")


def test_pictures_for_the_manual(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    """Realistic threads (set AGENTRT_WEB_SCREENSHOTS=docs/images to save the manual's pictures)."""
    named = agent.with_name("my-agent")  # the name the manual uses
    agent.rename(named)
    srv = server_factory(base_env(tmp_path, named, AWP_AGENT_DEFAULT_MODEL="claude-sonnet-4-5"))
    page = browser.new_page()
    new_thread(page, srv.url)
    say(page, "Draft the release notes for 2.4")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply h3")
    page.on("dialog", lambda d: d.accept("release-2.4") if d.type == "prompt" else d.accept())
    page.click("#thread-list li.current button.rename")
    page.wait_for_url("**/threads/release-2.4")
    prs = new_thread(page, srv.url)
    say(page, "Summarise the open pull requests")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply table")
    new_thread(page, srv.url)
    say(page, "Why does the CI job fail on Python 3.12?")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply pre")
    steps = last_assistant(page).locator(".steps li")
    assert steps.all_inner_texts() == ["pytest -q tests/billing — done", "Reading dates.py — done",
                                       "Searching code — done"]
    assert last_assistant(page).locator(".steps li.done").count() == 3
    assert page.locator("#agent-info").inner_text().split() == ["my-agent", "claude-sonnet-4-5"]
    titles = page.locator("#thread-list .title").all_inner_texts()
    assert titles == ["Why does the CI job fail on Python 3.12?", "Summarise the open pull requests", "release-2.4"]
    page.locator("#prompt").fill("Yes, open a pull request with both fixes")
    shot(page, "chat.png")
    page.click(f'#thread-list li[data-name="{prs}"] a')
    page.wait_for_selector(".reply table")
    page.locator(".msg.assistant .copy").first.hover()
    shot(page, "threads.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(srv.url + "/threads/release-2.4")
    page.wait_for_selector(".reply h2")
    shot(page, "chat-phone.png")
    res = page.goto(srv.url + "/threads/last-week")
    assert res is not None and res.status == 404
    assert page.locator("#agent-model").inner_text() == "claude-sonnet-4-5"  # every page's header
    page.set_viewport_size({"width": 900, "height": 420})
    shot(page, "not-found.png")
