"""`agentrt run`, `check`, `bridge` and the docs examples, as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentrt.testing import write_fixture_agent
from agentrt.testing._tape_agent import write_tape_agent

from ..plugin_data import CLAUDE_CODE_CAPTURES

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
CAPTURES = CLAUDE_CODE_CAPTURES


# run records every conversation and reads a config file: both go to a scratch
# directory, never the user's own.
_SCRATCH = tempfile.mkdtemp(prefix="agentrt-run-cli-")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
            "XDG_DATA_HOME": _SCRATCH, "XDG_CONFIG_HOME": _SCRATCH}
    base.update(env or {})
    return subprocess.run(
        [AGENTRT, *args], env=base, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def test_run_streams_plain_text_and_exits_0(tmp_path: Path) -> None:
    agent = str(ROOT / "docs" / "examples" / "echo_agent.py")
    proc = run_cli("run", "hello there", env={"AWP_AGENT_CLI_EXECUTABLE": agent})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "You said: hello there"
    assert "\x1b" not in proc.stdout  # not a terminal: plain text


def test_run_json_prints_one_normalized_event_per_line(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path, "normal")
    proc = run_cli("run", "--json", "--model", "m-7", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": exe})
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "turn_started" and "session_started" in types
    assert types.count("turn_completed") == 1 and types[-1] == "process_exited"
    started = next(e for e in events if e["type"] == "session_started")
    assert started["model"] == "m-7"  # the fixture echoes --model


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({"AWP_AGENT_CLI_EXECUTABLE": "relative/agent"}, "cli_executable_must_be_absolute"),
        ({"AWP_AGENT_CLI_EXECUTABLE": "/nonexistent/agent"}, "cli_executable_not_found"),
        ({"AWP_AGENT_CLI_PROTOCOL": "no-such-dialect"}, "invalid_cli_protocol"),
        ({"AWP_AGENT_CLI_ARGS_JSON": "{"}, "invalid_cli_args_json"),
        ({"AWP_AGENT_CLI_ARGS_JSON": '["https://api.example.com/v1"]'}, "remote_api_requires_explicit_opt_in"),
    ],
)
def test_launch_errors_exit_2_with_the_code_and_spawn_nothing(
    tmp_path: Path, env: dict[str, str], code: str
) -> None:
    marker = tmp_path / "spawned"
    exe = tmp_path / "agent"
    exe.write_text(f"#!/bin/sh\ntouch {marker}\n")
    exe.chmod(0o755)
    full = {"AWP_AGENT_CLI_EXECUTABLE": str(exe), **env}
    proc = run_cli("run", "hi", env=full)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"agentrt: error: {code}: ")
    assert not marker.exists()


def test_bad_resume_id_is_a_usage_error(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path, "normal")
    proc = run_cli("run", "--resume", "no spaces!", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": exe})
    assert proc.returncode == 2
    assert "invalid_resume_session_id" in proc.stderr


def test_agent_error_exits_1_with_its_code(tmp_path: Path) -> None:
    tape = write_tape_agent(tmp_path, CAPTURES / "http_500.stdout.jsonl")
    proc = run_cli("run", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": tape, "AWP_AGENT_CLI_PROTOCOL": "stream-json"})
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("agentrt: error: ")


def test_runtime_failure_exits_3(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path, "exit-mid-turn")
    proc = run_cli("run", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": exe})
    assert proc.returncode == 3
    assert proc.stderr.startswith("agentrt: error: exit_before_result: ")


def test_check_passes_a_conforming_cli_and_fails_a_broken_one(tmp_path: Path) -> None:
    good = write_fixture_agent(tmp_path, "normal", name="good")
    proc = run_cli("check", "--json", env={"AWP_AGENT_CLI_EXECUTABLE": good})
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], report
    assert {c["id"] for c in report["clauses"]} >= {"resume_honoured", "one_terminal_per_turn"}
    bad = write_fixture_agent(tmp_path, "output-before-input", name="bad")
    proc = run_cli("check", "--json", env={"AWP_AGENT_CLI_EXECUTABLE": bad})
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    failed = {c["id"] for c in report["clauses"] if c["status"] == "fail"}
    assert "no_output_before_input" in failed
    assert "protocol_only_stdout" not in failed


def test_check_passes_the_real_claude_capture_over_stream_json(tmp_path: Path) -> None:
    tape = write_tape_agent(tmp_path, CAPTURES / "basic_two_turns.stdout.jsonl")
    proc = run_cli(
        "check", "--json", env={"AWP_AGENT_CLI_EXECUTABLE": tape, "AWP_AGENT_CLI_PROTOCOL": "stream-json"}
    )
    report = json.loads(proc.stdout)
    assert report["ok"], report


def _bridge_env(tape: str) -> dict[str, str]:
    args = ["bridge", "--to", "awp-jsonl", "--", f"AWP_AGENT_CLI_EXECUTABLE={tape}"]
    args.append("AWP_AGENT_CLI_PROTOCOL=stream-json")
    return {"AWP_AGENT_CLI_EXECUTABLE": AGENTRT, "AWP_AGENT_CLI_ARGS_JSON": json.dumps(args)}


@pytest.mark.parametrize(
    ("capture", "expect_text", "expect_tools"),
    [
        ("basic_two_turns", "Hello from the fake server (user message 1). You said: hello", 0),
        ("tool_use_allowed", None, 1),
    ],
)
def test_agentrt_hosts_the_bridge_hosting_a_stream_json_capture(
    tmp_path: Path, capture: str, expect_text: str | None, expect_tools: int
) -> None:
    tape = write_tape_agent(tmp_path, CAPTURES / f"{capture}.stdout.jsonl")
    proc = run_cli("run", "--json", "hello", env=_bridge_env(tape))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types.count("turn_completed") == 1
    done = next(e for e in events if e["type"] == "turn_completed")
    raw = [json.loads(line) for line in (CAPTURES / f"{capture}.stdout.jsonl").read_text().splitlines()]
    result = next(o for o in raw if o["type"] == "result")
    assert done["session_id"] == result["session_id"]
    assert done["usage"]["input_tokens"] == result["usage"]["input_tokens"]
    assert done["usage"]["output_tokens"] == result["usage"]["output_tokens"]
    text = "".join(e["text"] for e in events if e["type"] == "text_delta")
    if expect_text is not None:
        assert text == expect_text
    assert types.count("tool_use") == expect_tools


def test_bridge_carries_resume_ids_across(tmp_path: Path) -> None:
    log = tmp_path / "argv.log"
    tape = tmp_path / "tape"
    script = write_tape_agent(tmp_path, CAPTURES / "resume.stdout.jsonl", name="tape-inner")
    tape.write_text(f"#!{sys.executable} -S\nimport sys,runpy\nsys.argv[1:1]=['--argv-log',{str(log)!r}]\n"
                    f"runpy.run_path({script!r}, run_name='__main__')\n")
    tape.chmod(0o755)
    sid = "d1efd9e4-e2ea-5ec5-888a-c55c1f181ffe"  # the resume capture's session (fixed by record.py)
    proc = run_cli("run", "--json", "--resume", sid, "third turn", env=_bridge_env(str(tape)))
    assert proc.returncode == 0, proc.stderr
    inner_argv = json.loads(log.read_text().splitlines()[0])
    assert inner_argv[inner_argv.index("--resume") + 1] == sid
    assert "--output-format" in inner_argv  # the inner CLI got stream-json's compat flags


def test_bridge_startup_error_is_one_result_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [AGENTRT, "bridge", "--to", "awp-jsonl", "--bogus"], capture_output=True, text=True, timeout=30,
        env={"PATH": os.environ["PATH"]}, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == {
        "type": "result", "subtype": "startup_error", "is_error": True, "result": "unsupported_argument:--bogus",
        "errors": ["unknown bridge argument"],
    }


def test_docs_embedding_example_runs() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "embed.py")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "You said: hello" in proc.stdout and "You said: and again" in proc.stdout
    assert proc.stdout.count("[done:") == 2
    assert "session " in proc.stdout


def test_help_starts_fast_and_lists_commands() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    for name in ("run", "check", "bridge", "agent", "plugins"):
        assert f"  {name}" in proc.stdout


_BROKEN = {"AGENTRT_PLUGIN_MODULES": "agentrt_no_such_plugin_module"}


def test_a_broken_plugin_gets_each_command_s_own_error() -> None:
    # The group (help, a plugin's command): usage error, exit 2.
    for args in (["--help"], ["threads", "list"]):
        proc = run_cli(*args, env=_BROKEN)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "plugin_load_failed" in proc.stderr
    # Core commands report it themselves.
    for args in (["run", "--model", "m", "hi"], ["plugins"], ["check", "--model", "m"]):
        proc = run_cli(*args, env={**_BROKEN, "AWP_AGENT_CLI_EXECUTABLE": "/bin/true"})
        assert proc.returncode == 2, (args, proc.stderr)
        assert "agentrt: error: plugin_load_failed" in proc.stderr
        assert "Traceback" not in proc.stderr
    # The reference agent and the bridge answer in their protocol: a startup error line, exit 1.
    for args in (["agent", "--model", "m"], ["bridge", "--to", "awp-jsonl", "--model", "m"]):
        proc = subprocess.run(
            [AGENTRT, *args],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"), **_BROKEN},
            input="", capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 1, (args, proc.stderr)
        line = json.loads(proc.stdout.splitlines()[0])
        assert line.get("result") == "plugin_load_failed", (args, line)
