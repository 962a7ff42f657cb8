"""`agentrt run` habits: the prompt from stdin, --timeout, error lines never empty, the env hint (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
ECHO = str(ROOT / "docs" / "examples" / "echo_agent.py")


def _run(tmp: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "XDG_DATA_HOME": str(tmp),
            "XDG_CONFIG_HOME": str(tmp), "AWP_AGENT_CLI_EXECUTABLE": ECHO}
    base.update(env)
    return subprocess.run([AGENTRT, "run", *args], env=base, capture_output=True, text=True, timeout=60,
                          input=stdin if stdin is not None else "", check=False)


def _script(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("args", [(), ("-",)])
def test_prompt_from_stdin(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = _run(tmp_path, *args, stdin="hello from a pipe\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "You said: hello from a pipe"


def test_an_argument_wins_over_stdin(tmp_path: Path) -> None:
    proc = _run(tmp_path, "from the argument", stdin="from the pipe\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "You said: from the argument"


def test_empty_stdin_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run(tmp_path, stdin="  \n")
    assert proc.returncode == 2
    assert proc.stderr.startswith("agentrt: error: prompt_empty: ")


def test_timeout_ends_a_stuck_turn_and_reaps_the_agent(tmp_path: Path) -> None:
    pidfile = tmp_path / "agent.pid"
    stuck = _script(tmp_path, "stuck-agent", (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stuck for real: only SIGKILL ends it\n"
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stdin.readline()\n"
        "while True:\n    time.sleep(3600)\n"
    ))
    proc = _run(tmp_path, "--timeout", "0.5", "hi", AWP_AGENT_CLI_EXECUTABLE=stuck)
    assert proc.returncode == 3, proc.stderr
    assert "agentrt: error: turn_timeout: no result within 0.5 s; the agent was stopped" in proc.stderr
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped before agentrt exited


def test_timeout_with_json_ends_the_event_stream_with_turn_failed(tmp_path: Path) -> None:
    stuck = _script(tmp_path, "stuck-agent", "import sys, time\nsys.stdin.readline()\ntime.sleep(3600)\n")
    proc = _run(tmp_path, "--json", "--no-log", "--timeout", "0.5", "hi", AWP_AGENT_CLI_EXECUTABLE=stuck)
    assert proc.returncode == 3, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    terminals = [e for e in events if e["type"] in ("turn_completed", "turn_failed")]
    assert terminals == [{"type": "turn_failed", "code": "turn_timeout",
                          "message": "no result within 0.5 s; the agent was stopped", "usage": None}]
    # Nothing of the turn after its end: only the stopped process's exit.
    assert [e["type"] for e in events[events.index(terminals[0]) + 1:]] == ["process_exited"]
    assert "agentrt: error: turn_timeout:" in proc.stderr


def test_timeout_must_be_positive(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--timeout", "0", "hi")
    assert proc.returncode == 2 and "--timeout" in proc.stderr


def test_an_agent_error_without_a_message_still_says_something(tmp_path: Path) -> None:
    silent = _script(tmp_path, "silent-agent", (
        "import json, sys\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'type': 'result', 'subtype': 'error', 'is_error': True, 'result': 'quota_exhausted',"
        " 'errors': []}), flush=True)\n"
        "sys.stdin.read()\n"
    ))
    proc = _run(tmp_path, "hi", AWP_AGENT_CLI_EXECUTABLE=silent)
    assert proc.returncode == 1, proc.stderr
    assert "agentrt: error: quota_exhausted: the agent gave no reason" in proc.stderr


def test_warns_when_a_shell_variable_does_not_reach_the_agent(tmp_path: Path) -> None:
    secret = "sk-" + "q" * 30
    proc = _run(tmp_path, "hi", OPENAI_API_KEY=secret, AGENTRT_API_BASE_URL="https://api.example.com/v1")
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "env_not_passed" in ln]
    assert line.startswith("agentrt: warning: env_not_passed: AGENTRT_API_BASE_URL, OPENAI_API_KEY are set here")
    assert "AWP_AGENT_CLI_ENV_JSON" in line and "AWP_AGENT_REMOTE_API_OPT_IN=1" in line
    assert secret not in proc.stderr and "api.example.com" not in proc.stderr


def test_no_warning_for_a_variable_that_is_passed(tmp_path: Path) -> None:
    proc = _run(tmp_path, "hi", OPENAI_API_KEY="sk-" + "q" * 30,
                AWP_AGENT_CLI_ENV_JSON=json.dumps({"OPENAI_API_KEY": "sk-" + "q" * 30}))
    assert proc.returncode == 0, proc.stderr
    assert "env_not_passed" not in proc.stderr
