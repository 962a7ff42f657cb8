"""Errors that say why: the reference agent's failures, the bridge's start-up, ``env_not_passed``, ``run -c``.

Real ``agentrt run`` subprocesses; the reference agent talks to a real loopback
server (or to a port nothing listens on).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from agentrt.testing import ReplayResponse, serve_replay, write_fixture_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def run(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/logs.db",
    }
    return subprocess.run([AGENTRT, *args], env={**base, **env}, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def reference_agent(url: str) -> dict[str, str]:
    return {
        "AWP_AGENT_CLI_EXECUTABLE": AGENTRT,
        "AWP_AGENT_CLI_ARGS_JSON": '["agent"]',
        "AWP_AGENT_CLI_ENV_JSON": json.dumps({"AGENTRT_API_BASE_URL": url, "AGENTRT_MODEL": "m"}),
    }


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("agentrt: error:")]
    return line


async def test_the_reference_agent_says_where_it_could_not_connect_and_why(tmp_path: Path) -> None:
    async with serve_replay([]) as server:
        url = server.url
    # The server is gone: nothing listens on its port.
    proc = await trio.to_thread.run_sync(lambda: run(tmp_path, "run", "--no-log", "hi", **reference_agent(url + "/v1")))
    assert proc.returncode == 1, proc.stderr
    origin = url.rstrip("/")
    assert _error_line(proc) == (
        f"agentrt: error: provider_connection_failed: could not reach the provider at {origin} "
        "(ConnectError: connection refused)"
    )


async def test_an_http_error_carries_its_status_and_a_masked_excerpt_of_the_body(tmp_path: Path) -> None:
    secret = "sk-" + "z" * 30
    body = {"error": {"code": "model_not_found", "message": f"The model m does not exist\n(key {secret})"}}
    async with serve_replay([ReplayResponse.json(body, status=404)]) as server:
        proc = await trio.to_thread.run_sync(
            lambda: run(tmp_path, "run", "--no-log", "--json", "hi", **reference_agent(server.url + "/v1")))
    assert proc.returncode == 1, proc.stderr
    message = (f"the provider at {server.url.rstrip('/')} answered HTTP 404 (model_not_found): "
               "The model m does not exist (key ****)")
    assert _error_line(proc) == f"agentrt: error: provider_http_404: {message}"
    failed = [json.loads(line) for line in proc.stdout.splitlines() if '"turn_failed"' in line]
    assert [(e["code"], e["message"]) for e in failed] == [("provider_http_404", message)]
    assert secret not in proc.stdout + proc.stderr


def test_a_bridge_to_a_missing_executable_names_the_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "claude")
    proc = run(tmp_path, "run", "--no-log", "hi", AWP_AGENT_CLI_EXECUTABLE=AGENTRT,
               AWP_AGENT_CLI_ARGS_JSON=json.dumps(["bridge", f"AWP_AGENT_CLI_EXECUTABLE={missing}"]))
    assert proc.returncode == 3, proc.stderr
    assert _error_line(proc) == f"agentrt: error: cli_executable_not_found: no such file: {missing}"
    assert "gave no reason" not in proc.stderr


def _agent(tmp: Path, preset: str = "") -> None:
    exe = write_fixture_agent(tmp)
    line = f'preset = "{preset}"\n' if preset else ""
    (tmp / "config.toml").write_text(f'[agents.fx]\nexecutable = "{exe}"\n{line}')


def test_env_not_passed_names_only_what_a_preset_agent_reads(tmp_path: Path) -> None:
    _agent(tmp_path, "claude-code")
    shell = {"OPENAI_API_KEY": "sk-" + "o" * 30, "AGENTRT_API_BASE_URL": "http://127.0.0.1:9/v1"}
    quiet = run(tmp_path, "run", "-a", "fx", "--no-log", "hi", **shell)
    assert quiet.returncode == 0, quiet.stderr
    assert "env_not_passed" not in quiet.stderr  # Claude Code reads neither
    told = run(tmp_path, "run", "-a", "fx", "--no-log", "hi", ANTHROPIC_API_KEY="sk-ant-" + "a" * 30, **shell)
    (line,) = [ln for ln in told.stderr.splitlines() if "env_not_passed" in ln]
    assert line.startswith("agentrt: warning: env_not_passed: ANTHROPIC_API_KEY is set here but")
    assert "once" not in line


def test_env_not_passed_for_an_unknown_agent_is_shown_once_and_can_be_silenced(tmp_path: Path) -> None:
    _agent(tmp_path)
    shell = {"OPENAI_API_KEY": "sk-" + "o" * 30}
    silenced = run(tmp_path, "run", "-a", "fx", "--no-log", "hi", AGENTRT_ENV_HINT="0", **shell)
    assert silenced.returncode == 0 and "env_not_passed" not in silenced.stderr
    first = run(tmp_path, "run", "-a", "fx", "--no-log", "hi", **shell)
    (line,) = [ln for ln in first.stderr.splitlines() if "env_not_passed" in ln]
    assert "OPENAI_API_KEY" in line and "shown once" in line and "AGENTRT_ENV_HINT=0" in line
    second = run(tmp_path, "run", "-a", "fx", "--no-log", "hi", **shell)
    assert second.returncode == 0 and "env_not_passed" not in second.stderr


def test_run_c_after_its_agent_was_removed_says_so_instead_of_dropping_its_env(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    (tmp_path / "config.toml").write_text(f'[agents.fx]\nexecutable = "{exe}"\nenv = {{ K = "V" }}\n')
    first = run(tmp_path, "run", "-a", "fx", "--json", "first")
    assert first.returncode == 0, first.stderr
    session = next(json.loads(x)["session_id"] for x in first.stdout.splitlines() if "session_started" in x)
    assert run(tmp_path, "agents", "rm", "fx").returncode == 0
    again = run(tmp_path, "run", "-c", "second")
    assert again.returncode == 2
    assert _error_line(again).startswith("agentrt: error: continued_agent_removed: the latest conversation was "
                                         "with agent 'fx', which is no longer in the config file")
    assert f"--resume {session}" in again.stderr
