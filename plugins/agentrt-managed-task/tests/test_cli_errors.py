"""`agentrt control-plane` and `agentrt worker` failures are one clear line and exit 2, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

API_KEY = "mt-test-key-0123456789abcdef"
AGENTRT = str(Path(os.path.realpath(os.path.dirname(sys.executable))) / "agentrt")


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTRT, *args], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _one_error_line(done: subprocess.CompletedProcess[str], code: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"agentrt: error: {code}: "), done.stderr
    return lines[0]


def test_control_plane_on_a_busy_port(tmp_path: Path, cli_environment: Any) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _cli(["control-plane", "--port", str(port), "--database", str(tmp_path / "cp.db")],
                    cli_environment(AGENTRT_CONTROL_PLANE_API_KEY=API_KEY))
    line = _one_error_line(done, "address_in_use")
    assert f"127.0.0.1:{port}" in line


def test_control_plane_without_a_key_refuses_to_start(tmp_path: Path, cli_environment: Any) -> None:
    env = cli_environment()
    env.pop("AGENTRT_CONTROL_PLANE_API_KEY", None)
    done = _cli(["control-plane", "--port", "0", "--database", str(tmp_path / "cp.db")], env)
    line = _one_error_line(done, "control_plane_api_key_missing")
    assert "AGENTRT_CONTROL_PLANE_API_KEY" in line
    assert not done.stdout  # never announced itself as ready


async def test_worker_with_a_wrong_key(tmp_path: Path, spawn_cli: Any, cli_environment: Any) -> None:
    cp = await spawn_cli(["control-plane", "--port", "0", "--database", str(tmp_path / "cp.db")],
                         cli_environment(AGENTRT_CONTROL_PLANE_API_KEY=API_KEY))
    wrong = "a-wrong-key-" + "9" * 16 + "xyzw"
    args = ["worker", "--control-plane", cp.ready["url"], "--allow", "echo", "--work-dir", str(tmp_path / "w"),
            "--trusted-path", cli_environment()["PATH"], "--retry-initial", "0.01", "--retry-max", "0.05"]
    env = cli_environment(AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN="1", AWP_CONTROL_PLANE_API_KEY=wrong)
    done = await trio.to_thread.run_sync(_cli, args, env)
    line = _one_error_line(done, "worker_registration_refused")
    assert "401" in line and "AWP_CONTROL_PLANE_API_KEY" in line and wrong not in done.stderr
