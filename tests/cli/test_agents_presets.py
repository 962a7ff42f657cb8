"""``agentrt agents add --preset`` and the executable checks of ``agents add``, as real subprocesses.

Presets are filled from executables laid out as npm installs them (a ``.bin``
directory of symlinks); one test starts the real Claude Code CLI from
``.peers/`` saved by its preset against a loopback fake Anthropic API.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agentrt.testing.fake_apis import serve_fake_anthropic

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
PEERS_BIN = Path(__file__).resolve().parents[2] / ".peers" / "node_modules" / ".bin"


def cli(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/a.db",
    }
    return subprocess.run([AGENTRT, *args], env={**base, **env}, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=tmp)


def saved(tmp: Path) -> dict[str, Any]:
    agents: dict[str, Any] = tomllib.loads((tmp / "config.toml").read_text())["agents"]
    return agents


def _exe(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(stat.S_IRWXU)
    return path


def _npm_layout(tmp: Path) -> Path:
    """``node_modules`` with each agent's package and a ``.bin`` of symlinks, as npm lays them out."""
    modules = tmp / "node_modules"
    bin_dir = modules / ".bin"
    bin_dir.mkdir(parents=True)
    targets = {
        "claude": _exe(modules / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"),
        "gemini": _exe(modules / "@google" / "gemini-cli" / "bundle" / "gemini.js"),
        "codex-acp": _exe(modules / "@zed-industries" / "codex-acp" / "bin" / "codex-acp.js"),
        "claude-agent-acp": _exe(modules / "@zed-industries" / "claude-agent-acp" / "dist" / "index.js"),
        "node": _exe(tmp / "nodejs" / "node"),
    }
    _exe(modules / "@zed-industries" / "codex-acp-linux-x64" / "bin" / "codex-acp")
    for name, target in targets.items():
        (bin_dir / name).symlink_to(os.path.relpath(target, bin_dir))
    return bin_dir


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
                    reason="the npm layout below names the linux-x64 codex-acp package")
def test_each_preset_fills_protocol_args_and_env_from_a_dir(tmp_path: Path) -> None:
    bin_dir = _npm_layout(tmp_path)
    real = {p.name: os.path.realpath(p) for p in bin_dir.iterdir()}
    secret = "sk-ant-" + "s" * 24
    shell = {"ANTHROPIC_API_KEY": secret, "GEMINI_API_KEY": "g-key-value", "OPENAI_API_KEY": "sk-" + "o" * 24,
             "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    for preset in ("claude-code", "gemini", "codex-acp", "claude-agent-acp"):
        proc = cli(tmp_path, "agents", "add", preset, "--preset", preset, "--dir", str(bin_dir), **shell)
        assert proc.returncode == 0, proc.stderr
        assert secret not in proc.stdout + proc.stderr
    agents = saved(tmp_path)
    assert agents["claude-code"] == {
        "executable": real["claude"], "protocol": "stream-json", "preset": "claude-code",
        "env": {"ANTHROPIC_API_KEY": secret},
    }
    assert agents["gemini"] == {
        "executable": real["gemini"], "args": ["--acp"], "protocol": "acp", "preset": "gemini",
        "env": {"GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_API_KEY": "g-key-value"}, "first_output_timeout": 120,
    }
    native = tmp_path / "node_modules" / "@zed-industries" / "codex-acp-linux-x64" / "bin" / "codex-acp"
    assert agents["codex-acp"] == {
        "executable": str(native), "protocol": "acp", "preset": "codex-acp",
        "env": {"OPENAI_API_KEY": shell["OPENAI_API_KEY"], "OPENAI_BASE_URL": shell["OPENAI_BASE_URL"]},
    }
    assert agents["claude-agent-acp"] == {
        "executable": real["node"], "args": [real["claude-agent-acp"]], "protocol": "acp",
        "preset": "claude-agent-acp", "first_output_timeout": 60,
        "env": {"ANTHROPIC_API_KEY": secret, "CLAUDE_CODE_EXECUTABLE": real["claude"]},
    }
    # Every saved agent resolves (the file is valid and each executable passes the launch contract).
    listed = cli(tmp_path, "agents", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["found"] for line in listed.stdout.splitlines()] == [True] * 4


def test_a_preset_whose_executable_is_nowhere_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    proc = cli(tmp_path, "agents", "add", "g", "--preset", "gemini", "--dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("agentrt: error: cli_executable_not_found: 'gemini' is not in ")
    assert "--dir" in proc.stderr
    unknown = cli(tmp_path, "agents", "add", "g", "--preset", "nope")
    assert unknown.returncode == 2 and "agentrt: error: unknown_preset: no preset 'nope'" in unknown.stderr
    assert not (tmp_path / "config.toml").exists()


@pytest.mark.parametrize(("make", "code"), [
    ("missing", "cli_executable_not_found"),
    ("directory", "cli_executable_not_regular_file"),
    ("not-executable", "cli_executable_not_executable"),
])
def test_agents_add_checks_the_executable_at_once(tmp_path: Path, make: str, code: str) -> None:
    path = tmp_path / "agent"
    if make == "directory":
        path.mkdir()
    elif make == "not-executable":
        path.write_text("#!/bin/sh\n")
    proc = cli(tmp_path, "agents", "add", "a", "--executable", str(path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"agentrt: error: {code}: ") and str(path) in proc.stderr
    assert not (tmp_path / "config.toml").exists()


def test_a_symlink_is_resolved_and_the_real_path_saved_and_named(tmp_path: Path) -> None:
    target = _exe(tmp_path / "real" / "agent-cli")
    link = tmp_path / "link"
    link.symlink_to(target)
    proc = cli(tmp_path, "agents", "add", "a", "--executable", str(link))
    assert proc.returncode == 0, proc.stderr
    assert saved(tmp_path)["a"]["executable"] == str(target)
    assert f"{link} is a symbolic link to {target}" in proc.stdout
    assert f"saved agent a: {target}" in proc.stdout


def test_the_claude_code_preset_runs_the_real_cli_with_approval(tmp_path: Path) -> None:
    if not (PEERS_BIN / "claude").exists():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with serve_fake_anthropic(tool_command="touch made.txt") as api:
        shell = {"ANTHROPIC_API_KEY": "sk-test-not-a-secret", "ANTHROPIC_BASE_URL": api.url}
        added = cli(tmp_path, "agents", "add", "claude", "--preset", "claude-code", "--dir", str(PEERS_BIN),
                    "--env", f"HOME={tmp_path / 'home'}", "--env", "DISABLE_TELEMETRY=1", **shell)
        assert added.returncode == 0, added.stderr
        assert "copied from this shell: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL" in added.stdout
        # The run's own shell has neither variable: the saved env is what reaches the CLI.
        proc = subprocess.run(
            [AGENTRT, "run", "-a", "claude", "-m", "claude-test", "--allow-tool", "Bash(touch:*)", "make the file"],
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AGENTRT_CONFIG": str(tmp_path / "config.toml"),
                 "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/a.db"},
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert (work / "made.txt").exists()
    assert proc.stdout.startswith("The tool said: ")


def test_partial_messages_and_preset_keys_are_checked_and_reach_the_launch(tmp_path: Path) -> None:
    from agentrt.config import parse_config, resolve_agent
    from agentrt.errors import AgentrtError

    path = tmp_path / "config.toml"
    text = '[agents.c]\nexecutable = "/bin/true"\nprotocol = "stream-json"\npreset = "claude-code"\n'
    cfg = parse_config(text + "partial_messages = false\n", path, {})
    assert cfg.agents["c"].preset == "claude-code"
    assert resolve_agent({}, "c", config=cfg).launch.partial_messages is False
    assert resolve_agent({}, "c", config=parse_config(text, path, {})).launch.partial_messages is True
    for bad, key in (('partial_messages = "no"', "partial_messages"), ('preset = "bogus"', "preset")):
        with pytest.raises(AgentrtError) as caught:
            parse_config(text.replace('preset = "claude-code"\n', "") + bad + "\n", path, {})
        assert caught.value.code == "config_invalid" and f"agents.c.{key} must be" in caught.value.detail


def test_the_config_example_of_the_docs_runs_claude_code_and_its_rules_decide(tmp_path: Path) -> None:
    """docs/agents.md's first example, as printed (claude on PATH); only the env points at the fake API."""
    if not (PEERS_BIN / "claude").exists():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")
    docs = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "config.toml").write_text(example)
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("kept")
    # Claude Code runs read-only commands (git status) without asking: an rm is asked about, and denied.
    with serve_fake_anthropic(tool_command="rm keep.txt") as api:
        env = {"ANTHROPIC_API_KEY": "sk-test-not-a-secret", "ANTHROPIC_BASE_URL": api.url,
               "HOME": str(tmp_path / "home"), "DISABLE_TELEMETRY": "1"}
        proc = subprocess.run(
            [AGENTRT, "run", "--json", "what changed?"],
            env={"PATH": f"{PEERS_BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "AWP_AGENT_CLI_ENV_JSON": json.dumps(env),
                 "AGENTRT_CONFIG": str(tmp_path / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/a.db"},
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert {r["model"] for r in api.requests} == {"claude-sonnet-4-5"}
    logs = cli(tmp_path, "logs", "--approvals", "--json", "-n", "0")
    [row] = [json.loads(line) for line in logs.stdout.splitlines()]
    assert (row["decision"], row["by"], row["agent"]) == ("deny", "rule:config deny Bash(rm:*)", "claude")
    assert (work / "keep.txt").read_text() == "kept"
    assert [r.get("is_error") for r in api.tool_results] == [True]


@pytest.mark.parametrize("preset", ["gemini", "codex-acp"])
def test_the_acp_presets_run_the_real_peers(tmp_path: Path, preset: str) -> None:
    """Gemini CLI and codex-acp saved by their presets from ``.peers/``, against their loopback fake APIs."""
    from agentrt.testing.real_peers import CODEX_PEER, GEMINI_PEER, fake_api, launch_env, require

    peer = GEMINI_PEER if preset == "gemini" else CODEX_PEER
    require(peer)
    work = tmp_path / "work"
    work.mkdir()
    with fake_api(peer, reply="Hello from the fake API.", pieces=4) as api:
        env = launch_env(peer, tmp_path / "home", api.url)
        extra = [f"--env={k}={v}" for k, v in env.items() if k != "GEMINI_CLI_NO_RELAUNCH"]
        added = cli(tmp_path, "agents", "add", "p", "--preset", preset, "--dir", str(PEERS_BIN), "-m", peer.model,
                    *extra)
        assert added.returncode == 0, added.stderr
        proc = subprocess.run(
            [AGENTRT, "run", "-a", "p", "--json", "hi"],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
                 "AGENTRT_CONFIG": str(tmp_path / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/a.db"},
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, cwd=work)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    deltas = [e["text"] for e in events if e["type"] == "text_delta"]
    assert "".join(deltas) == "Hello from the fake API." and len(deltas) > 1
    assert [e["type"] for e in events].count("turn_completed") == 1


def test_the_claude_agent_acp_preset_runs_the_adapter_and_claude_code(tmp_path: Path) -> None:
    """node + Zed's adapter from ``.peers/``, CLAUDE_CODE_EXECUTABLE the Claude Code found beside it."""
    if not (PEERS_BIN / "claude-agent-acp").exists() or not (PEERS_BIN / "claude").exists():
        if os.environ.get("CI"):
            pytest.fail(".peers/ (npm ci) is required in CI")
        pytest.skip("claude-agent-acp or Claude Code is not installed (`npm ci` in .peers/)")
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with serve_fake_anthropic("Hello from the fake API.", chunk=5) as api:
        added = cli(tmp_path, "agents", "add", "cca", "--preset", "claude-agent-acp", "--dir", str(PEERS_BIN),
                    "-m", "claude-test", "--env", f"HOME={tmp_path / 'home'}", "--env", "DISABLE_TELEMETRY=1",
                    ANTHROPIC_API_KEY="sk-test-not-a-secret", ANTHROPIC_BASE_URL=api.url, PATH=os.environ["PATH"])
        assert added.returncode == 0, added.stderr
        proc = subprocess.run(
            [AGENTRT, "run", "-a", "cca", "--json", "hi"],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
                 "AGENTRT_CONFIG": str(tmp_path / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/a.db"},
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, cwd=work)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    deltas = [e["text"] for e in events if e["type"] == "text_delta"]
    assert "".join(deltas) == "Hello from the fake API." and len(deltas) > 1
    assert saved(tmp_path)["cca"]["env"]["CLAUDE_CODE_EXECUTABLE"] == os.path.realpath(PEERS_BIN / "claude")
