"""Ctrl-C in `agentrt run` with the real Claude Code (the binary pinned in `.peers/`) mid-reply.

The loopback fake Anthropic API sends the first deltas of its reply and holds the rest; once `run --json`
has printed a delta, the test sends SIGINT: agentrt sends Claude Code the SDK's `interrupt` control request
and Claude Code ends the turn itself, which is the one `turn_cancelled` of the run.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from agentrt.testing.fake_apis import serve_fake_anthropic

from .test_run_cancel import Run, _one_cancelled

CLAUDE = Path(__file__).resolve().parents[2] / ".peers" / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64"
CLAUDE = CLAUDE / "claude"


def _claude() -> str:
    if not CLAUDE.is_file():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    return str(CLAUDE)


@pytest.mark.skipif(sys.platform != "linux", reason="the pinned Claude Code binary is for Linux")
def test_ctrl_c_interrupts_the_real_claude_code_mid_reply(tmp_path: Path) -> None:
    exe = _claude()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    reply = "one two three four five six seven eight nine ten"
    with serve_fake_anthropic(reply, chunk=4, hold_after=2) as api:
        try:
            env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-test-not-a-secret", "HOME": str(home),
                   "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
            run = Run(tmp_path, exe, "stream-json", "-m", "claude-test", "hello", child_env=env, cwd=work)
            run.text("one ")  # the reply is streaming, and the API holds the rest back
            assert api.holding.is_set()
            run.proc.send_signal(signal.SIGINT)
            status, events, err = run.finish()
        finally:
            api.release.set()
    terminal = _one_cancelled(status, events, err)
    # Claude Code answered the interrupt and ended the turn itself (its code kept in the message).
    assert "the agent said" in terminal["message"], terminal
    assert run.recorded() == [("failed", "turn_cancelled")]
