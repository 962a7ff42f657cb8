"""The composer while a turn runs, tool steps as they run and end, and status lines in words.

Debian's chromium through Playwright against a real ``agentrt web``: the awp-jsonl fixture agent, and
the stream-json fixture replaying a real Claude Code capture (its ``system/status`` "requesting" lines).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

from agentrt_stream_json import fixture_agent

from .conftest import Chat, base_env, last_assistant, new_thread, say, shot

FIXTURE = Path(fixture_agent.__file__)
# A copy of stream-json's capture (tests/core/test_plugin_tests_stay_home.py keeps it the same bytes).
CAPTURE = Path(__file__).resolve().parent / "captures" / "claude_code_tool_use_allowed_partial.stdout.jsonl"


def _bubbles(page: Any, kind: str) -> list[str]:
    return [t.strip() for t in page.locator(f"#messages .msg.{kind}:not(.queued) .bubble").all_inner_texts()]


def test_enter_while_a_turn_runs_queues_the_message_in_order(chat: Chat) -> None:
    page = chat.page
    say(page, "slow 14")
    page.wait_for_function("() => (document.querySelector('.msg.assistant.streaming .reply')||{}).textContent"
                           "?.includes('w2')")
    # Enter twice while the reply streams.
    page.fill("#prompt", "one")
    page.press("#prompt", "Enter")
    page.fill("#prompt", "two")
    page.press("#prompt", "Enter")
    queued = page.locator(".msg.user.queued .bubble")
    assert queued.all_inner_texts() == ["one", "two"]
    shot(page, "queued.png")
    # Nothing doubled, and the running reply stays under its own message.
    assert _bubbles(page, "user") == ["slow 14"]
    assert page.locator(".msg.assistant").count() == 1, page.locator("#messages").inner_html()
    assert page.locator(".msg.assistant.streaming").count() == 1

    page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming) .reply p').length === 3")
    expected_users = ["slow 14", "one", "two"]
    expected_replies = [" ".join(f"w{i}" for i in range(14)), "echo: one", "echo: two"]
    assert _bubbles(page, "user") == expected_users
    assert [t.strip() for t in page.locator(".msg.assistant .reply").all_inner_texts()] == expected_replies
    assert page.locator(".msg.queued").count() == 0 and page.locator(".error-bubble").count() == 0
    # The database holds the same turns in the same order.
    page.reload()
    page.wait_for_selector(".msg.assistant .reply p")
    assert _bubbles(page, "user") == expected_users
    assert [t.strip() for t in page.locator(".msg.assistant .reply").all_inner_texts()] == expected_replies


def test_a_queued_message_can_be_taken_back(chat: Chat) -> None:
    page = chat.page
    say(page, "slow 10")
    page.wait_for_selector(".msg.assistant.streaming")
    page.fill("#prompt", "never mind")
    page.press("#prompt", "Enter")
    page.locator(".msg.queued button.unqueue").click()
    assert page.locator(".msg.queued").count() == 0
    page.fill("#prompt", "after")
    page.click("#send")  # Send queues as Enter does
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming) .reply p').length === 2")
    assert _bubbles(page, "user") == ["slow 10", "after"]


def test_tool_steps_read_running_then_done(chat: Chat) -> None:
    page = chat.page
    say(page, "tool")
    step = page.locator(".steps li").first
    page.wait_for_selector(".steps li.running")
    assert step.inner_text() == "Running: ls -la /secret/place"
    page.wait_for_selector(".steps li.done")
    assert step.inner_text() == "ls -la /secret/place — done"
    # A step with no result closes with its turn, in the past too.
    say(page, "toolopen")
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming)').length === 2")
    assert last_assistant(page).locator(".steps li").all_inner_texts() == ["git status --short — done"]
    page.reload()  # the history has no steps; nothing there says Running either
    page.wait_for_selector(".msg.assistant .reply p")
    assert "Running" not in page.locator("#messages").inner_text()


def _replay_env(tmp: Path, agent: Path) -> dict[str, str]:
    exe = tmp / "bin" / "fake-claude"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    env = base_env(tmp, agent)
    (tmp / "config.toml").write_text(
        f'[agents.claude]\nexecutable = "{exe}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
        f'env = {{ STREAM_JSON_FIXTURE_MODE = "replay", STREAM_JSON_FIXTURE_CAPTURE = "{CAPTURE}" }}\n')
    for key in ("AWP_AGENT_CLI_EXECUTABLE", "AWP_AGENT_CLI_ARGS_JSON"):
        env.pop(key)
    env["AGENTRT_CONFIG"] = str(tmp / "config.toml")
    return env


def test_claude_codes_status_words_never_reach_the_page(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    srv = server_factory(_replay_env(tmp_path, agent), "-a", "claude", "--no-bots")
    page = browser.new_page()
    new_thread(page, srv.url)
    # Every text the status line and the steps ever show (Playwright's evaluate is not inline script).
    page.evaluate(
        """() => {
          window.__shown = [];
          new MutationObserver(() => {
            document.querySelectorAll('.status, .steps li').forEach((n) => window.__shown.push(n.textContent));
          }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
        }"""
    )
    say(page, "hello")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    # The words before and after the tool call are paragraphs of their own.
    assert last_assistant(page).locator(".reply p").all_inner_texts() == ["I will run a command.", "The tool said: hi"]
    shown = page.evaluate("window.__shown")
    assert shown and not [s for s in shown if "requesting" in s], shown
    assert last_assistant(page).locator(".steps li").all_inner_texts() == ["echo hi — done"]
    assert "requesting" not in page.content()
    assert last_assistant(page).locator(".status").inner_text() == ""


def test_another_page_queues_behind_the_turn_and_its_stop_names_that_turn(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    first = browser.new_page()
    name = new_thread(first, srv.url)
    say(first, "hang")
    tick = ("() => (document.querySelector('.msg.assistant.streaming .reply')||{}).textContent"
            "?.includes('tick2')")
    first.wait_for_function(tick)
    # A second page of the thread, opened mid-reply: it knows the turn (and its key) from the server.
    second = browser.new_page()
    second.goto(f"{srv.url}/threads/{name}")
    second.wait_for_function(tick)
    assert second.locator("#live-turn").get_attribute("data-key")
    second.fill("#prompt", "from the second page")
    second.press("#prompt", "Enter")
    assert second.locator(".msg.user.queued .bubble").all_inner_texts() == ["from the second page"]
    second.click("#stop")
    for page in (first, second):
        page.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming)').length === 2")
        assert _bubbles(page, "user") == ["hang", "from the second page"]
        assert page.locator(".msg.assistant .stopped").count() == 1
    second.wait_for_selector("text=echo: from the second page")
    first.wait_for_selector("text=echo: from the second page")


def test_queued_messages_survive_a_reload(chat: Chat) -> None:
    """The queue is kept in the tab's sessionStorage: a reload mid-reply shows it again, then sends it in order."""
    page = chat.page
    say(page, "hang")
    page.wait_for_function("() => (document.querySelector('.msg.assistant.streaming .reply')||{}).textContent"
                           "?.includes('tick1')")
    for text in ("one", "two", "three"):
        page.fill("#prompt", text)
        page.press("#prompt", "Enter")
    page.locator(".msg.queued button.unqueue").nth(1).click()  # "two" taken back
    assert page.locator(".msg.user.queued .bubble").all_inner_texts() == ["one", "three"]
    page.reload()
    page.wait_for_selector(".msg.assistant.streaming")
    assert page.locator(".msg.user.queued .bubble").all_inner_texts() == ["one", "three"]
    page.click("#stop")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p:text-is('echo: three')")
    assert _bubbles(page, "user") == ["hang", "one", "three"]
    assert [t.strip() for t in page.locator(".msg.assistant .reply p").all_inner_texts()][-2:] == [
        "echo: one", "echo: three"]
    assert page.locator(".msg.queued").count() == 0
    assert page.evaluate("() => sessionStorage.length") == 0  # sent: nothing left to restore
    page.reload()
    page.wait_for_selector(".msg.assistant .reply p")
    assert page.locator(".msg.queued").count() == 0
