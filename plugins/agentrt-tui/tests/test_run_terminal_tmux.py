"""`agentrt run` and `chat` on a real 80x24 terminal (tmux): the question stays visible, tool calls get lines.

The stream-json fixture agent announces a Bash call (the live status line then says what runs) and asks
for it; the question must stay on the screen, whole and unpainted over, until it is answered.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .test_chat_tmux import AGENTRT, RECORD_EXIT, STREAM_JSON_FIXTURE, Tmux

QUESTION = "Allow Bash"


def _argv(tmp: Path, status: str, *command: str) -> list[str]:
    exe = tmp / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\n"
                   f"runpy.run_path({str(STREAM_JSON_FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(0o700)
    (tmp / "config.toml").write_text(
        f'[agents.claude]\nexecutable = "{exe}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
        'env = { STREAM_JSON_FIXTURE_MODE = "permission", STREAM_JSON_FIXTURE_COMMAND = "echo hi" }\n')
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8", "TERM": "screen",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/chat.db",
    }
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(RECORD_EXIT),
            str(tmp / status), AGENTRT, *command]


async def _start_80x24(tmux: Tmux, name: str, argv: list[str]) -> None:
    await tmux.run("-u", "new-session", "-d", "-x", "80", "-y", "24", "-s", name, *argv)


def _question_intact(screen: str) -> bool:
    # The question's line as the asker wrote it: nothing drawn into it or over it.
    return any(line.startswith(QUESTION) and "[y/n/a]" in line for line in screen.splitlines())


async def test_run_keeps_the_question_visible_until_it_is_answered(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    try:
        await _start_80x24(tmux, "run", _argv(tmp_path, "run.status", "run", "-a", "claude",
                                               "--permission-mode", "ask", "go"))
        await tmux.wait_text("run", QUESTION)
        # A wrong answer: the asker says so, and the question is still there, whole.
        await tmux.keys("run", "x", "Enter")
        screen = await tmux.wait_text("run", "answer y (allow once)")
        assert "⋯ Running" not in screen  # the live status line is paused while asking
        assert _question_intact(screen), screen
        # The tool call has its own line, above the question.
        assert "● Bash: echo hi" in screen.split(QUESTION)[0], screen
        await tmux.keys("run", "y", "Enter")
        screen = await tmux.wait_text("run", "allowed:echo hi")
        assert await tmux.wait_exit(tmp_path / "run.status") == 0
        screen = await tmux.screen("run")
        # After the answer: the tool's result on one line, then the reply as a block of its own.
        lines = screen.splitlines()
        at = next(i for i, line in enumerate(lines) if "⎿ hi" in line)
        assert any("allowed:echo hi" in line for line in lines[at + 1:]), screen
    finally:
        await tmux.kill()


async def test_chat_keeps_the_question_visible_until_it_is_answered(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    try:
        await _start_80x24(tmux, "chat", _argv(tmp_path, "chat.status", "chat", "-a", "claude"))
        await tmux.wait_text("chat", "/help for commands")
        await tmux.keys("chat", "go", "Enter")
        screen = await tmux.wait_text("chat", QUESTION)
        assert "● Bash: echo hi" in screen
        await tmux.keys("chat", "x", "Enter")
        screen = await tmux.wait_text("chat", "answer y (allow once)")
        assert _question_intact(screen), screen
        assert "⋯ Running" not in screen
        await tmux.keys("chat", "y", "Enter")
        await tmux.wait_text("chat", "allowed:echo hi")
        await tmux.wait_for("chat", lambda s: s.rstrip().endswith("›"), "the prompt after the reply")
        await tmux.keys("chat", "C-d")
        assert await tmux.wait_exit(tmp_path / "chat.status") == 0
    finally:
        await tmux.kill()


async def test_chat_second_ctrl_c_stops_an_agent_that_ignores_the_interrupt(tmp_path: Path) -> None:
    marker = tmp_path / "stdin-closed"
    argv = _argv(tmp_path, "deaf.status", "chat", "-a", "claude")
    config = (tmp_path / "config.toml").read_text().replace(
        'STREAM_JSON_FIXTURE_MODE = "permission"',
        f'STREAM_JSON_FIXTURE_MODE = "deaf", STREAM_JSON_FIXTURE_MARKER = "{marker}"')
    (tmp_path / "config.toml").write_text(config)
    tmux = Tmux(tmp_path)
    try:
        await _start_80x24(tmux, "deaf", argv)
        await tmux.wait_text("deaf", "/help for commands")
        await tmux.keys("deaf", "go", "Enter")
        await tmux.wait_text("deaf", "working")
        await tmux.keys("deaf", "C-c")
        await tmux.wait_text("deaf", "not stopping")  # the interrupt arrived; the agent ignores it
        await tmux.keys("deaf", "C-c")
        await tmux.wait_text("deaf", "the turn was cancelled [turn_cancelled]")
        # Killed at once: the bounded stop (which closes its stdin first) never reached it.
        assert not marker.exists()
        await tmux.wait_for("deaf", lambda s: s.rstrip().endswith("›"), "the prompt after the cancel")
        await tmux.keys("deaf", "C-d")
        assert await tmux.wait_exit(tmp_path / "deaf.status") == 0
    finally:
        await tmux.kill()
