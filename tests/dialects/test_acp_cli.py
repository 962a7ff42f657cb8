"""``agentrt run --protocol acp``: the CLI hosting real ACP agents, as a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ..plugin_data import ACP_AGENT

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = ACP_AGENT
TS_AGENT = ROOT / ".peers" / "node_modules" / "@agentclientprotocol" / "sdk" / "dist" / "examples" / "agent.js"


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
    # The suite's scratch XDG directories (tests/conftest.py): never the real database.
    base.update({k: v for k, v in os.environ.items() if k.startswith("XDG_")})
    base.update(env)
    # timeout: a hang guard only (the TypeScript example sleeps a second per step).
    return subprocess.run(
        [AGENTRT, *args], env=base, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def _fixture(tmp_path: Path) -> str:
    path = tmp_path / "acp-fixture-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    path.chmod(stat.S_IRWXU)
    return str(path)


def test_run_protocol_acp_with_the_typescript_example_agent() -> None:
    node = shutil.which("node")
    if node is None or not TS_AGENT.is_file():
        if os.environ.get("CI"):
            pytest.fail("node and .peers/ (npm ci) are required in CI")
        pytest.skip("the TypeScript ACP peer is not installed (node, and `npm ci` in .peers/)")
    env = {"AWP_AGENT_CLI_EXECUTABLE": os.path.realpath(node), "AWP_AGENT_CLI_ARGS_JSON": json.dumps([str(TS_AGENT)])}
    proc = _run("run", "--protocol", "acp", "--json", "hello", env=env)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "turn_started" and types.count("turn_completed") == 1 and types[-1] == "process_exited"
    assert types.count("session_started") == 1 and types.count("control_request") == 1
    assert [e["id"] for e in events if e["type"] == "tool_use"] == ["call_1", "call_2"]


def test_run_env_protocol_acp_model_and_resume_in_band(tmp_path: Path) -> None:
    env = {"AWP_AGENT_CLI_EXECUTABLE": _fixture(tmp_path), "AWP_AGENT_CLI_PROTOCOL": "acp"}
    proc = _run("run", "--model", "m-1", "--resume", "fixture-9", "echo me", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "echo:echo me"  # the replayed history is not printed as the reply
    env["ACP_FIXTURE_NO_LOAD"] = "1"
    env["AWP_AGENT_CLI_ENV_JSON"] = json.dumps({"ACP_FIXTURE_NO_LOAD": "1"})
    proc = _run("run", "--resume", "fixture-9", "echo me", env=env)
    assert proc.returncode == 1
    assert "resume_unsupported" in proc.stderr
