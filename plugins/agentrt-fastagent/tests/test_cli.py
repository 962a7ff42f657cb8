"""``agentrt bots``, as a user runs it: real CLI processes sharing a JSON store with `supervise`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agentrt.lowlevel import JsonlReader, ProcessSpec, open_process
from agentrt_fastagent._config import load_config

from .conftest import WAIT, make_binary

AGENTRT = str(Path(sys.executable).parent / "agentrt")

CONFIG = """
[supervisor]
reconcile_interval = 0.05
backoff = [0.05]
stop_timeout = 2.0
default_profile = "main"

[profiles.main]
provider = "openai"
model = "gpt-test"
api_key_env = "TEST_FASTAGENT_KEY"

[bots.declared]
profile = "main"
"""


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "bots.toml").write_text(CONFIG)
    binary = make_binary(tmp_path / "bin", "stateful_restore_or_qr")
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AGENTRT_LOAD_PLUGINS": "fastagent",
        "AGENTRT_BOTS_CONFIG": str(tmp_path / "bots.toml"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "FASTAGENT_BINARY_PATH": str(binary),
        "TEST_FASTAGENT_KEY": "sk-cli-secret",
    }


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTRT, "bots", *args], env=env, capture_output=True, text=True, timeout=60)


def test_add_list_start_stop_offline(cli_env: dict[str, str]) -> None:
    assert cli(cli_env, "add", "b1", "--profile", "main").returncode == 0
    out = cli(cli_env, "list", "--json")
    rows = {r["bot_id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert set(rows) == {"b1", "declared"} and rows["b1"]["desired_state"] == "stopped"
    assert cli(cli_env, "start", "b1").returncode == 0
    rows = {r["bot_id"]: r for r in map(json.loads, cli(cli_env, "list", "--json").stdout.splitlines())}
    assert rows["b1"]["desired_state"] == "running"
    bad = cli(cli_env, "start", "nope")
    assert bad.returncode == 2 and "unknown_bot" in bad.stderr
    bad = cli(cli_env, "add", "../evil")
    assert bad.returncode == 2 and "invalid_bot_id" in bad.stderr
    bad = cli(cli_env, "qr", "b1")
    assert bad.returncode == 2 and "no_qr_code" in bad.stderr


def test_invalid_config_is_a_clear_error(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "bots.toml").write_text("[supervisor]\nbackoff = 'soon'\n")
    out = cli(cli_env, "list")
    assert out.returncode == 2 and "bots_config_invalid" in out.stderr and "backoff" in out.stderr


def test_config_resolver_reads_secret_from_env(tmp_path: Path) -> None:
    (tmp_path / "bots.toml").write_text(CONFIG)
    cfg = load_config({"AGENTRT_BOTS_CONFIG": str(tmp_path / "bots.toml"), "HOME": str(tmp_path)})
    from agentrt.bots import BotRecord

    profile, sandbox = cfg.resolver({"TEST_FASTAGENT_KEY": "k1"})(BotRecord(bot_id="x"))
    assert profile is not None and profile.api_key == "k1" and sandbox.mode == "disabled"
    profile, _ = cfg.resolver({})(BotRecord(bot_id="x"))
    assert profile is not None and profile.api_key == ""  # blank: LLM_PROFILE_INVALID at start
    profile, _ = cfg.resolver({})(BotRecord(bot_id="x", config={"profile": "nope"}))
    assert profile is None  # LLM_PROFILE_REQUIRED at start
    assert cfg.backoff == (0.05,) and cfg.instances_dir == tmp_path / ".local/share/agentrt/bots"


async def test_supervise_obeys_the_cli(cli_env: dict[str, str], tmp_path: Path) -> None:
    assert cli(cli_env, "add", "b1").returncode == 0
    spec = ProcessSpec(argv=(AGENTRT, "bots", "supervise", "--json"), env=cli_env, stdin=False, term_grace=10)
    lines: list[dict] = []
    async with open_process(spec) as sup:
        reader = JsonlReader()

        async def until(cond) -> None:
            with trio.fail_after(WAIT * 3):
                while not any(cond(x) for x in lines):
                    chunk = await sup.receive_some()
                    assert chunk, sup.stderr_tail().decode()
                    lines.extend(reader.feed(chunk))

        def state(name: str):
            return lambda x: x["event"]["type"] == "state_changed" and x["event"]["state"] == name

        await trio.to_thread.run_sync(lambda: cli(cli_env, "start", "b1"))
        await until(state("waiting_for_qr"))
        qr = await trio.to_thread.run_sync(lambda: cli(cli_env, "qr", "b1", "--url"))
        drawn = await trio.to_thread.run_sync(lambda: cli(cli_env, "qr", "b1"))
        await trio.to_thread.run_sync(lambda: cli(cli_env, "stop", "b1"))
        await until(state("stopped"))
        sup.send_signal(signal.SIGINT)
        status = await sup.stop()
    assert status.returncode == 130, sup.stderr_tail().decode()  # 128 + SIGINT, after the bounded stop
    assert qr.stdout.strip().startswith("https://liteapp.weixin.qq.com/q/")
    assert drawn.returncode == 0 and "reissue_qr_1" in drawn.stdout
    kinds = [x["event"].get("kind") for x in lines if x["event"]["type"] == "lifecycle"]
    assert kinds == ["process_started", "qr_code", "stopping", "stopped"]
    assert all(x["bot"] == "b1" for x in lines)
    seqs = [x["seq"] for x in lines]
    assert seqs == sorted(seqs)
    logs = cli(cli_env, "logs", "b1", "--json")
    assert [json.loads(x)["type"] for x in logs.stdout.splitlines()] == kinds
    listed = json.loads(cli(cli_env, "list", "--json").stdout.splitlines()[0])
    assert listed["status"] == "stopped" and listed["desired_state"] == "stopped"
    assert "sk-cli-secret" not in json.dumps(lines) + logs.stdout + sup.stderr_tail().decode()
    assert "fastagent fixture" in cli(cli_env, "logs", "b1", "--stderr").stdout


async def test_qr_is_drawn_in_the_terminal(cli_env: dict[str, str]) -> None:
    from agentrt.bots import BotRecord
    from agentrt_fastagent._store import JsonFileBotStore

    store = JsonFileBotStore(Path(cli_env["XDG_DATA_HOME"]) / "agentrt" / "bot-store")
    url = "https://liteapp.weixin.qq.com/q/7GiQu1?qrcode=abc&bot_type=3"
    await store.save_bot(BotRecord(bot_id="b1", status="waiting_for_qr", last_qr_code_url=url, last_qr_code_id="q1"))
    out = await trio.to_thread.run_sync(lambda: cli(cli_env, "qr", "b1"))
    assert out.returncode == 0 and "q1" in out.stdout
    assert "█" in out.stdout or "▀" in out.stdout
    # a tampered record never reaches the terminal
    await store.save_bot(BotRecord(bot_id="b2", status="waiting_for_qr", last_qr_code_url="https://evil.example/q/x"))
    out = await trio.to_thread.run_sync(lambda: cli(cli_env, "qr", "b2"))
    assert out.returncode == 2 and "evil" not in out.stdout + out.stderr


def test_help_is_fast_and_lists_bots(cli_env: dict[str, str]) -> None:
    out = subprocess.run([AGENTRT, "--help"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "bots" in out.stdout
    out = subprocess.run([AGENTRT, "bots", "--help"], env=cli_env, capture_output=True, text=True, timeout=60)
    for sub in ("add", "list", "start", "stop", "restart", "logs", "qr", "supervise"):
        assert sub in out.stdout
    code = (
        "import sys, agentrt_fastagent, agentrt.cli; "
        "bad = [m for m in ('trio', 'agentrt_fastagent._supervisor', 'segno') if m in sys.modules]; "
        "print(bad)"
    )
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "[]"
