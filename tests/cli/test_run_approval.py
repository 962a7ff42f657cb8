"""Tool approval in ``agentrt run``: rules from the command line and the config, recorded in the database.

Real CLI subprocesses with the stream-json fixture agent, which asks to run a
Bash command (``can_use_tool``) and replies with the answer it received.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from ..plugin_data import STREAM_JSON_AGENT

FIXTURE = STREAM_JSON_AGENT
AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def _setup(tmp: Path, permissions: str = "") -> None:
    exe = tmp / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    (tmp / "config.toml").write_text(
        f'[agents.claude]\nexecutable = "{exe}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
        f'env = {{ STREAM_JSON_FIXTURE_MODE = "permission", STREAM_JSON_FIXTURE_COMMAND = "git status --short" }}\n'
        + permissions
    )


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/logs.db",
    }
    return subprocess.run([AGENTRT, *args], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def approvals(tmp: Path) -> list[dict[str, object]]:
    proc = cli(tmp, "logs", "--approvals", "--json", "-n", "0")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_run_denies_by_default_and_records_the_rule(tmp_path: Path) -> None:
    _setup(tmp_path)
    proc = cli(tmp_path, "run", "-a", "claude", "status please")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("denied:agentrt: Bash(git status --short) denied (mode:deny (default))")
    [row] = approvals(tmp_path)
    assert (row["tool"], row["summary"], row["decision"], row["by"], row["agent"]) == (
        "Bash", "git status --short", "deny", "mode:deny (default)", "claude")
    plain = cli(tmp_path, "logs", "--approvals")
    assert plain.returncode == 0, plain.stderr
    [line] = plain.stdout.splitlines()
    assert " deny   Bash " in line and "git status --short" in line and "by mode:deny (default)" in line


def test_allow_tool_prefix_allows_and_deny_tool_beats_it(tmp_path: Path) -> None:
    _setup(tmp_path)
    allowed = cli(tmp_path, "run", "-a", "claude", "--allow-tool", "Bash(git status:*)", "go")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "allowed:git status --short"
    both = cli(tmp_path, "run", "-a", "claude", "--allow-tool", "Bash(git status:*)", "--deny-tool", "Bash", "go")
    assert both.stdout.startswith("denied:") and "rule:--deny-tool Bash" in both.stdout
    assert [(r["decision"], r["by"]) for r in approvals(tmp_path)] == [
        ("deny", "rule:--deny-tool Bash"), ("allow", "rule:--allow-tool Bash(git status:*)")]


def test_config_rules_and_the_command_line_beating_them(tmp_path: Path) -> None:
    _setup(tmp_path, '[agents.claude.permissions]\nmode = "allow"\ndeny = ["Bash(git:*)"]\n')
    denied = cli(tmp_path, "run", "-a", "claude", "go")
    assert "denied (rule:config deny Bash(git:*))" in denied.stdout
    allowed = cli(tmp_path, "run", "-a", "claude", "--allow-tool", "Bash(git status:*)", "go")
    assert allowed.stdout.strip() == "allowed:git status --short"


def test_mode_ask_without_a_terminal_denies_with_a_note(tmp_path: Path) -> None:
    _setup(tmp_path)
    proc = cli(tmp_path, "run", "-a", "claude", "--permission-mode", "ask", "go")
    assert proc.returncode == 0, proc.stderr
    assert "agentrt: note: Bash(git status --short) denied: permission mode ask, but stdin is not a terminal" in (
        proc.stderr)
    assert proc.stdout.startswith("denied:")
    assert [r["by"] for r in approvals(tmp_path)] == ["no_terminal"]


def test_no_log_records_no_decision_and_a_bad_pattern_is_a_usage_error(tmp_path: Path) -> None:
    _setup(tmp_path)
    assert cli(tmp_path, "run", "-a", "claude", "--no-log", "go").returncode == 0
    assert approvals(tmp_path) == []
    bad = cli(tmp_path, "run", "-a", "claude", "--allow-tool", "Bash(", "go")
    assert bad.returncode == 2
    assert bad.stderr.startswith("agentrt: error: invalid_tool_pattern: 'Bash(' is not a tool pattern")


def test_logs_show_an_agents_escape_codes_escaped_and_whole(tmp_path: Path) -> None:
    _setup(tmp_path)
    config = tmp_path / "config.toml"
    attack = "rm -rf ~/important #" + "x" * 300 + "\\u001b[2K\\u001b[1GAllow Bash(git status)"
    config.write_text(config.read_text().replace('"git status --short"', f'"{attack}"'))
    proc = cli(tmp_path, "run", "-a", "claude", "go")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "denied (mode:deny (default))" in proc.stdout
    plain = cli(tmp_path, "logs", "--approvals")
    assert "\x1b" not in plain.stdout and "rm -rf ~/important #xxx" in plain.stdout
    full = cli(tmp_path, "logs", "--approvals", "--full")
    assert "\x1b" not in full.stdout
    assert "rm -rf ~/important #" + "x" * 300 + "\\x1b[2K\\x1b[1GAllow Bash(git status)" in full.stdout
    [row] = approvals(tmp_path)
    assert str(row["summary"]).endswith("\\x1b[1GAllow Bash(git status)")
