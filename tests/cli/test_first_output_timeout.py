"""An agent's ``first_output_timeout``: checked, filled in by presets, and the bound run and bridge use.

A slow-starting agent (Gemini CLI answers ``initialize`` in 11-20+ s on a busy
machine) needs more than the 30 s default before its first recognised line;
``AGENTRT_FIRST_OUTPUT_TIMEOUT`` still wins.  Real parts: ``agentrt run`` and
``agentrt bridge`` as subprocesses, a real config file, the ACP fixture agent
launched as awp-jsonl (it writes nothing awp-jsonl recognises, so only the
bound ends the turn, and its message names the bound used).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrt.config import parse_config, resolve_agent
from agentrt.errors import AgentrtError

from ..plugin_data import ACP_AGENT

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
BOUND = 60  # hang guard only


def _silent_agent_config(tmp_path: Path, key: str) -> dict[str, str]:
    exe = tmp_path / "acp-agent"
    exe.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(ACP_AGENT)!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    config = tmp_path / "config.toml"
    config.write_text(f'[agents.slow]\nexecutable = "{exe}"\nprotocol = "awp-jsonl"\n{key}\n')
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "AGENTRT_CONFIG": str(config)}


def _run(env: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run([AGENTRT, "run", "--json", "--no-log", "-a", "slow", "hi"], env=env, capture_output=True,
                          text=True, timeout=BOUND, stdin=subprocess.DEVNULL, check=False)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def _failure(events: list[dict[str, Any]]) -> str:
    (failed,) = [e for e in events if e["type"] in ("turn_completed", "turn_failed")]
    assert failed["code"] == "protocol_mismatch", failed
    message: str = failed["message"]
    return message


def test_run_uses_the_agents_bound_and_the_env_wins(tmp_path: Path) -> None:
    env = _silent_agent_config(tmp_path, "first_output_timeout = 1.5")
    status, events = _run(env)
    assert status == 3
    assert "recognises within 1.5 s of the prompt" in _failure(events)
    status, events = _run({**env, "AGENTRT_FIRST_OUTPUT_TIMEOUT": "1"})
    assert status == 3
    assert "recognises within 1 s of the prompt" in _failure(events)


def test_the_bridge_uses_the_agents_bound(tmp_path: Path) -> None:
    env = _silent_agent_config(tmp_path, "first_output_timeout = 1.5")
    turn = json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    done = subprocess.run([AGENTRT, "bridge", "--to", "awp-jsonl", "-a", "slow"], env=env, input=turn,
                          capture_output=True, text=True, timeout=BOUND, check=False)
    results = [json.loads(line) for line in done.stdout.splitlines() if '"result"' in line]
    assert len(results) == 1, done.stdout + done.stderr
    assert "recognises within 1.5 s of the prompt" in json.dumps(results[0]), results


def _resolved(table: str, env: dict[str, str] | None = None) -> Any:
    path = Path("/nonexistent/config.toml")
    cfg = parse_config(f'[agents.a]\nexecutable = "/bin/true"\nprotocol = "acp"\n{table}', path, {})
    return resolve_agent(env or {}, "a", config=cfg).first_output_timeout


def test_presets_fill_in_a_bound_the_table_and_the_env_override() -> None:
    assert _resolved('preset = "gemini"\n') == 120
    assert _resolved('preset = "claude-agent-acp"\n') == 60
    assert _resolved('preset = "codex-acp"\n') == "env"  # the default (30 s) is ample: it starts in under 1 s
    assert _resolved("") == "env"
    assert _resolved('preset = "gemini"\nfirst_output_timeout = 45\n') == 45
    assert _resolved("first_output_timeout = 0\n") is None  # no bound
    assert _resolved('preset = "gemini"\n', {"AGENTRT_FIRST_OUTPUT_TIMEOUT": "7"}) == "env"


@pytest.mark.parametrize("value", ['"120"', "true", "-1", "3601", "nan", "inf"])
def test_a_bad_bound_names_the_key(value: str) -> None:
    with pytest.raises(AgentrtError) as caught:
        _resolved(f"first_output_timeout = {value}\n")
    assert caught.value.code == "config_invalid"
    assert "agents.a.first_output_timeout must be a number of seconds from 0 (no bound) to 3600" in caught.value.detail
    assert "config.toml:4:" in caught.value.detail  # the key's line
