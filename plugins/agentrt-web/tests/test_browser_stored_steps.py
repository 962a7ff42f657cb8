"""A reopened thread shows its turns' tool steps, from the replayed transcript, as the live page drew them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import base_env
from .test_browser_chat import new_thread, say

#: What the live page shows once the turn has ended: the command whole, its controls escaped.
STEPS = ["printf '\\x1b[31m red' \\u202e; ls — done", "false — failed"]


def _steps(page: Any) -> list[str]:
    texts: list[str] = page.locator(".msg.assistant").last.locator(".steps li").all_inner_texts()
    return texts


def test_reopened_thread_shows_tool_steps_as_live(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    page = browser.new_page()
    name = new_thread(page, srv.url)
    say(page, "tools2")
    page.wait_for_selector(".msg.assistant:not(.streaming) .reply p")
    live_steps = _steps(page)
    live_reply = page.locator(".msg.assistant").last.locator(".reply").inner_text()
    assert live_steps == STEPS
    assert page.locator(".steps li.done").count() == 1 and page.locator(".steps li.error").count() == 1

    # A fresh page on the stored thread: no live turn, only what the store gives back.
    fresh = browser.new_page()
    fresh.goto(f"{srv.url}/threads/{name}")
    fresh.wait_for_selector(".msg.assistant .reply p")
    assert _steps(fresh) == live_steps
    assert fresh.locator(".steps li.done").count() == 1 and fresh.locator(".steps li.error").count() == 1
    # The escaped command is text, never markup or a live control character.
    assert "\x1b" not in fresh.content() and "\u202e" not in fresh.content()
    # The words after the calls are a paragraph of their own, as live (not "it.The tool said").
    paragraphs = fresh.locator(".msg.assistant").last.locator(".reply p").all_inner_texts()
    assert paragraphs == ["I will run it.", "The tool said: hi"]
    assert fresh.locator(".msg.assistant").last.locator(".reply").inner_text() == live_reply

    # A second turn without tools, then a reload: each turn keeps its own steps.
    say(fresh, "plain words")
    fresh.wait_for_function("() => document.querySelectorAll('.msg.assistant:not(.streaming) .reply p').length >= 2"
                            " && !document.body.classList.contains('busy')")
    fresh.reload()
    fresh.wait_for_selector(".msg.assistant .reply p")
    turns = fresh.locator(".msg.assistant")
    assert turns.count() == 2
    assert turns.first.locator(".steps li").all_inner_texts() == STEPS
    assert turns.last.locator(".steps li").count() == 0


def test_break_after_steps_as_the_live_sink() -> None:
    from agentrt_web._steps import break_after_steps

    assert break_after_steps("I will run it.The tool said: hi", [14]) == "I will run it.\n\nThe tool said: hi"
    assert break_after_steps("a\nb", [2]) == "a\n\nb"
    assert break_after_steps("a\n\nb", [3]) == "a\n\nb"
    # Offsets past the part shown (a long reply is cut) and repeated ones change nothing.
    assert break_after_steps("abc", [3, 99]) == "abc"
    assert break_after_steps("ab", [1, 1]) == "a\n\nb"
