"""The approval card's Always, and ``agentrt logs --approvals`` naming a thread as it is called now.

Debian's chromium through Playwright against a real ``agentrt web`` and the stream-json fixture agent
that asks to run the same command every turn; the decisions land in the real database.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import new_thread, say
from .test_browser_approval import _env

DONE = "() => document.querySelectorAll('.msg.assistant:not(.streaming) .reply p').length === {n}"


def test_always_approves_now_and_the_same_request_later_and_logs_follow_a_rename(
    tmp_path: Path, agent: Path, server_factory: Any, browser: Any
) -> None:
    env = _env(tmp_path, agent)
    srv = server_factory(env, "-a", "claude", "--no-bots")
    page = browser.new_page()
    name = new_thread(page, srv.url)

    say(page, "first")
    card = page.locator(".approval").last
    card.locator(".question").wait_for()
    # Always sits beside Approve and Deny.
    assert card.locator("button").all_inner_texts() == ["Approve", "Always", "Deny"]
    # Its tooltip says what "always" will cover.
    assert (card.locator("button.always").get_attribute("title") or "").startswith("Approve, and approve Bash")
    card.locator("button.always").click()
    page.wait_for_function(DONE.format(n=1))
    assert page.locator(".msg.assistant").last.locator(".reply").inner_text().strip() == "allowed:git status --short"
    assert card.locator(".note").inner_text() == "Approved (always, in this thread)"

    # The same request again: allowed without a card.
    say(page, "second")
    page.wait_for_function(DONE.format(n=2))
    assert page.locator(".msg.assistant").last.locator(".reply").inner_text().strip() == "allowed:git status --short"
    assert page.locator(".approval").count() == 1

    # Renamed, the thread's decisions are listed under its new name.
    renamed = page.evaluate(
        """async ([name, fresh]) => {
          const token = document.querySelector('meta[name="csrf-token"]').content;
          const res = await fetch('/api/threads/' + name + '/rename', {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': token}, body: JSON.stringify({name: fresh})});
          return res.status;
        }""",
        [name, "renamed-thread"],
    )
    assert renamed == 200
    out = subprocess.run([sys.executable, "-m", "agentrt", "logs", "--approvals", "--json"], env=env,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["thread"], r["decision"], r["by"]) for r in rows] == [
        ("renamed-thread", "allow", "always"), ("renamed-thread", "allow", "user:always")]
    plain = subprocess.run([sys.executable, "-m", "agentrt", "logs", "--approvals"], env=env,
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert plain.stdout.count("(thread renamed-thread)") == 2 and name not in plain.stdout
