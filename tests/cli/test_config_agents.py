"""Named agents: the config file, ``-a`` on every command, ``agentrt agents``, as real subprocesses.

The agents are the fixture agent CLI (``agentrt.testing``) and the reference
agent against a replay server on loopback; the config is a real file.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agentrt.testing import ReplayResponse, serve_replay, write_fixture_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def cli(tmp: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """``agentrt ARGS`` with a scratch config file and database under ``tmp``."""
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/a.db",
    }
    base.update(env or {})
    return subprocess.run([AGENTRT, *args], env=base, capture_output=True, text=True, timeout=60,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


def events(proc: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def write_config(tmp: Path, text: str) -> Path:
    path = tmp / "config.toml"
    path.write_text(text)
    return path


def test_named_agent_runs_with_its_args_env_and_model_and_the_env_wins_per_field(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    write_config(tmp_path, f"""
[agents.fx]
executable = "{exe}"
args = ["--mode", "env-dump"]
env = {{ FROM_CONFIG = "yes" }}
model = "config-model"
""")
    proc = cli(tmp_path, "run", "-a", "fx", "--json", "hi")
    assert proc.returncode == 0, proc.stderr
    got = events(proc)
    started = next(e for e in got if e["type"] == "session_started")
    assert started["model"] == "config-model"
    child_env = json.loads("".join(str(e["text"]) for e in got if e["type"] == "text_delta"))
    assert child_env["FROM_CONFIG"] == "yes" and "AGENTRT_CONFIG" not in child_env

    # AWP_AGENT_DEFAULT_MODEL wins over the file; -m wins over both.
    proc = cli(tmp_path, "run", "-a", "fx", "--json", "hi", env={"AWP_AGENT_DEFAULT_MODEL": "env-model"})
    assert next(e for e in events(proc) if e["type"] == "session_started")["model"] == "env-model"
    proc = cli(tmp_path, "run", "-a", "fx", "-m", "flag-model", "--json", "hi",
               env={"AWP_AGENT_DEFAULT_MODEL": "env-model"})
    assert next(e for e in events(proc) if e["type"] == "session_started")["model"] == "flag-model"
    # AWP_AGENT_CLI_ARGS_JSON replaces the file's args (the fixture then answers normally).
    proc = cli(tmp_path, "run", "-a", "fx", "hi", env={"AWP_AGENT_CLI_ARGS_JSON": "[]"})
    assert proc.returncode == 0 and proc.stdout.strip() == "echo: hi", proc.stderr


def test_default_agent_applies_only_without_an_env_executable(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    other = write_fixture_agent(tmp_path, name="other")
    write_config(tmp_path, f"""
default_agent = "fx"
[agents.fx]
executable = "{exe}"
model = "from-default"
""")
    proc = cli(tmp_path, "run", "--json", "hi")
    assert proc.returncode == 0, proc.stderr
    assert next(e for e in events(proc) if e["type"] == "session_started")["model"] == "from-default"
    # The launch contract alone names the agent: the file's default stays out of it.
    proc = cli(tmp_path, "run", "--json", "hi", env={"AWP_AGENT_CLI_EXECUTABLE": other})
    assert proc.returncode == 0, proc.stderr
    assert next(e for e in events(proc) if e["type"] == "session_started")["model"] == "fixture-model"


def test_a_bare_executable_is_looked_up_on_path_and_its_symlink_resolved(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    real = write_fixture_agent(tmp_path / "real")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fixture-cli").symlink_to(real)
    write_config(tmp_path, '[agents.fx]\nexecutable = "fixture-cli"\n')
    path = f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    shown = cli(tmp_path, "agents", "show", "fx", "--json", env={"PATH": path})
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["executable"] == real
    proc = cli(tmp_path, "run", "-a", "fx", "hi", env={"PATH": path})
    assert proc.returncode == 0 and proc.stdout.strip() == "echo: hi", proc.stderr
    # Not on PATH: listed as such, and using it says where it is configured.
    listed = cli(tmp_path, "agents", "list")
    assert "(not on PATH)" in listed.stdout
    missing = cli(tmp_path, "run", "-a", "fx", "hi")
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"agentrt: error: config_invalid: {tmp_path / 'config.toml'}:1: ")


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ('[agents.x]\nexecutable = "/bin/true"\nargs = [1,\n', 3, "invalid value"),
        ('[agents.x]\nexecutable = "/bin/true"\n\nmodle = "m"\n', 4, "unknown key agents.x.modle"),
        ('[agents.a]\nexecutable = "/bin/true"\n[agents.x]\nexecutable = "/bin/true"\nargs = ["a", 2]\n', 5,
         "invalid_cli_args_json: agents.x.args[1] is not a string"),
        ('[agents.x]\nexecutable = "/bin/true"\npermissions = { mode = "maybe" }\n', 3,
         "agents.x.permissions.mode must be one of deny, ask, allow"),
        ('[agents.x]\nexecutable = "/bin/true"\npermissions = { allow = ["Bash(ls\\n)"] }\n', 3,
         "agents.x.permissions.allow[0] is not a tool pattern"),
        ('\n\ndefault_agent = "nope"\n[agents.x]\nexecutable = "/bin/true"\n', 3, "default_agent must name"),
        ('[agents.x]\nexecutable = "rel/path"\n', 2, "must be absolute or a bare name"),
        ('[agents.x]\nexecutable = "/bin/true"\nenv = { "BAD-NAME" = "v" }\n', 3, "invalid_cli_env_entry"),
        ('[logs]\nenabled = "no"\n', 2, "logs.enabled must be true or false"),
    ],
)
def test_a_bad_file_names_the_file_and_line_and_exits_2(tmp_path: Path, text: str, line: int, what: str) -> None:
    path = write_config(tmp_path, text)
    for args in (("run", "hi"), ("agents", "list"), ("check",)):
        proc = cli(tmp_path, *args, env={"AWP_AGENT_CLI_EXECUTABLE": "/bin/true"})
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(f"agentrt: error: config_invalid: {path}:{line}: "), proc.stderr
        assert what in proc.stderr, proc.stderr


def test_a_secret_in_a_bad_env_table_is_never_echoed(tmp_path: Path) -> None:
    write_config(tmp_path, '[agents.x]\nexecutable = "/nonexistent/agent"\nenv = { K = "sk-verysecret\\u0000" }\n')
    proc = cli(tmp_path, "run", "-a", "x", "hi")
    assert proc.returncode == 2 and "config_invalid" in proc.stderr
    assert "verysecret" not in proc.stderr


def test_unknown_agent_is_a_clear_error(tmp_path: Path) -> None:
    write_config(tmp_path, '[agents.known]\nexecutable = "/bin/true"\n')
    proc = cli(tmp_path, "run", "-a", "nope", "hi")
    assert proc.returncode == 2
    assert proc.stderr.startswith("agentrt: error: unknown_agent: no agent named 'nope'") and "known" in proc.stderr


def test_agents_list_and_show_mask_secrets(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    write_config(tmp_path, f"""
default_agent = "fx"
[agents.fx]
executable = "{exe}"
protocol = "awp-jsonl"
env = {{ API_TOKEN = "tok-12345678", PLAIN = "visible", URL = "https://user:hunter2@example.com/v1" }}
permissions = {{ mode = "ask", allow = ["Read", "Bash(git status:*)"] }}
""")
    listed = cli(tmp_path, "agents", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"* fx\tawp-jsonl\t-\t{exe}")
    as_json = [json.loads(x) for x in cli(tmp_path, "agents", "list", "--json").stdout.splitlines()]
    assert as_json[0]["env"] == {"API_TOKEN": "****", "PLAIN": "visible", "URL": "https://****@example.com/v1"}
    assert as_json[0]["permissions"] == {"mode": "ask", "allow": ["Read", "Bash(git status:*)"], "deny": []}
    shown = cli(tmp_path, "agents", "show", "fx")
    assert "env:        API_TOKEN=****" in shown.stdout and "PLAIN=visible" in shown.stdout
    for out in (listed.stdout, shown.stdout, json.dumps(as_json)):
        assert "tok-12345678" not in out and "hunter2" not in out


def test_agents_show_prints_preset_partial_messages_and_first_output_timeout(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    write_config(tmp_path, f"""
[agents.slow]
executable = "{exe}"
preset = "gemini"
partial_messages = false
first_output_timeout = 90
[agents.plain]
executable = "{exe}"
""")
    slow = cli(tmp_path, "agents", "show", "slow")
    assert slow.returncode == 0, slow.stderr
    lines = slow.stdout.splitlines()
    assert "preset:     gemini" in lines
    assert "partial_messages: false" in lines
    assert "first_output_timeout: 90 s" in lines
    plain = cli(tmp_path, "agents", "show", "plain").stdout.splitlines()
    assert "preset:     -" in plain and "partial_messages: true" in plain
    assert "first_output_timeout: - (the default, or AGENTRT_FIRST_OUTPUT_TIMEOUT)" in plain
    as_json = json.loads(cli(tmp_path, "agents", "show", "slow", "--json").stdout)
    assert (as_json["preset"], as_json["partial_messages"], as_json["first_output_timeout"]) == ("gemini", False, 90)


def test_agents_add_keeps_comments_writes_0600_and_refuses_a_duplicate(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    path = write_config(tmp_path, "# my agents\n[agents.old]\nexecutable = \"/bin/true\"  # keep me\n")
    added = cli(tmp_path, "agents", "add", "fx", "--executable", exe, "--arg", "--deltas", "--arg", "3",
                "--env", "K=V", "-m", "m1", "--default")
    assert added.returncode == 0, added.stderr
    text = path.read_text()
    assert text.startswith("# my agents\n") and "# keep me" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    proc = cli(tmp_path, "run", "--json", "hi")  # fx is now the default
    assert proc.returncode == 0, proc.stderr
    assert next(e for e in events(proc) if e["type"] == "session_started")["model"] == "m1"
    again = cli(tmp_path, "agents", "add", "fx", "--executable", exe)
    assert again.returncode == 2 and "agent_exists" in again.stderr
    # Nothing invalid is ever written.
    broken = cli(tmp_path, "agents", "add", "bad", "--executable", exe, "--protocol", "NOT VALID")
    assert broken.returncode == 2 and "invalid_cli_protocol" in broken.stderr
    assert "bad" not in path.read_text()
    removed = cli(tmp_path, "agents", "rm", "fx")
    assert removed.returncode == 0
    assert "default_agent" not in path.read_text() and "[agents.old]" in path.read_text()


async def test_an_endpoint_saved_as_an_agent_chats_with_a_and_the_demo_writes_nothing(tmp_path: Path) -> None:
    body = [
        b'data: {"choices":[{"index":0,"delta":{"content":"Paris"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    async with serve_replay([ReplayResponse.sse(body)] * 2) as server:
        added = await trio.to_thread.run_sync(
            lambda: cli(tmp_path, "agents", "add", "local", "--endpoint", server.url + "/v1", "-m", "tiny"))
        assert added.returncode == 0, added.stderr
        shown = json.loads((await trio.to_thread.run_sync(
            lambda: cli(tmp_path, "agents", "show", "local", "--json"))).stdout)
        assert shown["args"][-1] == "agent" and shown["protocol"] == "awp-jsonl"
        assert shown["env"]["AGENTRT_API_BASE_URL"] == server.url + "/v1"
        chat = await trio.to_thread.run_sync(
            lambda: cli(tmp_path, "chat", "-a", "local", env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl,sqlite,tui"},
                        stdin="What is the capital of France?\n"))
        assert chat.returncode == 0, chat.stderr
        assert "Paris" in chat.stdout
        assert server.requests[0].json["model"] == "tiny"
        # The demo against the same endpoint starts nothing and writes no config.
        before = (tmp_path / "config.toml").read_bytes()
        demo = await trio.to_thread.run_sync(lambda: cli(
            tmp_path, "demo", "hi", env={"AGENTRT_API_BASE_URL": server.url + "/v1", "AGENTRT_MODEL": "tiny"}))
        assert demo.returncode == 0 and "Paris" in demo.stdout, demo.stderr
        assert (tmp_path / "config.toml").read_bytes() == before and not (tmp_path / ".config").exists()
        assert len(server.requests) == 2
    logs = await trio.to_thread.run_sync(lambda: cli(tmp_path, "logs", "-a", "local", "--json"))
    assert [json.loads(x)["reply"] for x in logs.stdout.splitlines()] == ["Paris"]


def test_check_and_bridge_take_a_named_agent(tmp_path: Path) -> None:
    exe = write_fixture_agent(tmp_path)
    config = write_config(tmp_path, f'[agents.fx]\nexecutable = "{exe}"\n')
    checked = cli(tmp_path, "check", "-a", "fx")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The bridge, hosted with an allow-listed environment, is pointed at the file by an override.
    line = json.dumps({"type": "user", "message": {"role": "user", "content": "via bridge"}}) + "\n"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    bridged = subprocess.run([AGENTRT, "bridge", "-a", "fx", "--", f"AGENTRT_CONFIG={config}"], env=env,
                             input=line, capture_output=True, text=True, timeout=60)
    assert bridged.returncode == 0, bridged.stderr
    results = [json.loads(x) for x in bridged.stdout.splitlines() if '"result"' in x]
    assert results[-1]["result"] == "echo: via bridge"
    unknown = subprocess.run([AGENTRT, "bridge", "-a", "nope", "--", f"AGENTRT_CONFIG={config}"], env=env,
                             input="", capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and json.loads(unknown.stdout)["result"] == "unknown_agent"
