"""``agentrt chat`` with the real Claude Code CLI in a real terminal (tmux): the tool question is asked there.

Claude Code (``.peers/``) talks to the loopback fake Anthropic API, which asks
for ``Bash`` with ``touch made.txt``; agentrt started it with
``--permission-prompt-tool stdio``, so the question reaches the chat.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from agentrt.testing.fake_apis import serve_fake_anthropic
from agentrt.testing.real_peers import CLAUDE_CODE, peer_path

sys.path.insert(0, str(Path(__file__).parent))
from test_chat_tmux import AGENTRT, RECORD_EXIT, Tmux

CLAUDE = peer_path(CLAUDE_CODE)
BOUND = 90  # a hang guard only: the real CLI starts slowly on a busy machine


@pytest.mark.parametrize("answer", ["y", "n"])
async def test_chat_asks_about_claude_codes_tool_and_the_answer_decides(tmp_path: Path, answer: str) -> None:
    if not CLAUDE.is_file():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    tmux = Tmux(tmp_path)
    with serve_fake_anthropic(tool_command="touch made.txt") as api:
        agent_env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-test-not-a-secret", "HOME": str(home),
                     "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        env_line = ", ".join(f"{k} = {json.dumps(v)}" for k, v in agent_env.items())
        (tmp_path / "config.toml").write_text(
            f'[agents.claude]\nexecutable = "{CLAUDE}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
            f"env = {{ {env_line} }}\n")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
               "TERM": "screen", "AGENTRT_CONFIG": str(tmp_path / "config.toml"),
               "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/chat.db"}
        argv = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(RECORD_EXIT),
                str(tmp_path / "chat.status"), AGENTRT, "chat", "-a", "claude"]
        try:
            # In the work directory (-c), where Claude Code's Bash runs.
            await tmux.run("-u", "new-session", "-d", "-x", "120", "-y", "40", "-s", "cc", "-c", str(work), *argv)
            await tmux.wait_text("cc", "/help for commands", timeout=BOUND)
            await tmux.keys("cc", "make the file", "Enter")
            screen = await tmux.wait_text("cc", "Allow Bash? [y/n/a]", timeout=BOUND)
            assert "touch made.txt" in screen
            await tmux.keys("cc", answer, "Enter")
            await tmux.wait_text("cc", "The tool said:", timeout=BOUND)
            await tmux.wait_for("cc", lambda s: s.rstrip().endswith("›"), "the prompt after the reply", BOUND)
            await tmux.keys("cc", "/exit", "Enter")
            assert await tmux.wait_exit(tmp_path / "chat.status", timeout=BOUND) == 0
        finally:
            await tmux.kill()
    assert (work / "made.txt").exists() is (answer == "y")
    db = sqlite3.connect(tmp_path / "chat.db")
    rows = db.execute("SELECT tool, decision, by FROM approvals").fetchall()
    db.close()
    assert rows == [("Bash", "allow" if answer == "y" else "deny", "user")]
