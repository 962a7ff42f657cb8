"""`agentrt run` errors that say why: the agent's last stderr lines, masked and bounded (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
DYING = Path(__file__).with_name("_dying_agent.py")
SECRET = "very-private-value-0042"


def _exe(tmp: Path) -> str:
    exe = tmp / "dying-agent"
    exe.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(DYING)!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    return str(exe)


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "XDG_DATA_HOME": str(tmp),
        "XDG_CONFIG_HOME": str(tmp), "AWP_AGENT_CLI_EXECUTABLE": _exe(tmp), "AWP_AGENT_CLI_PROTOCOL": "stream-json",
        "AWP_AGENT_CLI_ENV_JSON": json.dumps({"FIXTURE_API_KEY": SECRET}),
    }
    return subprocess.run([AGENTRT, "run", *args, "hi"], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_exit_before_result_shows_the_agents_last_stderr_lines(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "agentrt: error: exit_before_result: the agent exited before its result (code=7)" in proc.stderr
    assert "fixture: fatal: the model refused the credentials" in proc.stderr
    # Bounded: only the last lines, not the whole of it.
    assert "starting step 19" in proc.stderr and "starting step 10" not in proc.stderr
    # Masked: the secret env value and the bearer token never show.
    assert SECRET not in proc.stderr and "abcdefghijklmnop1234" not in proc.stderr
    assert "using key ****" in proc.stderr and "Bearer ****" in proc.stderr


def test_turn_failed_event_carries_the_stderr_tail(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--json")
    assert proc.returncode == 3, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    failed = [e for e in events if e["type"] == "turn_failed"]
    assert len(failed) == 1 and failed[0]["code"] == "exit_before_result"
    message = failed[0]["message"]
    assert message.startswith("the agent exited before its result (code=7)")
    assert message.rstrip().endswith("fixture: fatal: the model refused the credentials")
    assert len(message.splitlines()) == 1 + 5
    assert SECRET not in proc.stdout
