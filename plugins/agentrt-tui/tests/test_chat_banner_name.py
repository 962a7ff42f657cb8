"""The chat banner names the configured agent the user chose, its dialect beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentrt.testing import write_fixture_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _chat(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
    env.update(HOME=str(tmp), AGENTRT_CONFIG=str(tmp / "config.toml"), AGENTRT_LOAD_PLUGINS="awp-jsonl,tui",
               **extra)
    echo = write_fixture_agent(tmp)
    (tmp / "config.toml").write_text(f'[agents.helper]\nexecutable = "{echo}"\nprotocol = "awp-jsonl"\n')
    return subprocess.run([AGENTRT, "chat", "--no-log", *args], input="hi\n", capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_banner_shows_the_configured_agents_name_and_dialect(tmp_path: Path) -> None:
    done = _chat(tmp_path, "-a", "helper")
    assert done.returncode == 0, done.stderr
    assert "echo: hi" in done.stdout
    # stdout is not a terminal: the banner is on stderr.
    assert "chat with helper (awp-jsonl). /help for commands" in done.stderr, done.stderr


def test_banner_without_a_configured_agent_names_the_dialect(tmp_path: Path) -> None:
    done = _chat(tmp_path, AWP_AGENT_CLI_EXECUTABLE=write_fixture_agent(tmp_path, name="other"),
                 AWP_AGENT_CLI_PROTOCOL="awp-jsonl")
    assert done.returncode == 0, done.stderr
    assert "chat with awp-jsonl agent. /help for commands" in done.stderr, done.stderr
