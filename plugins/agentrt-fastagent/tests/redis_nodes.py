"""Helpers of the shared-supervisor tests: a private redis-server, node processes, who runs which bot."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

CONFIG = """
[supervisor]
reconcile_interval = 0.2
backoff = [0.2]
stop_timeout = 1.0
default_profile = "main"

[profiles.main]
provider = "openai"
model = "gpt-test"
api_key_env = "TEST_FASTAGENT_KEY"
"""


def start_redis(port: int, bind: str = "127.0.0.1", *, prefix: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """A redis-server without persistence, ready when this returns (synchronised on its readiness line)."""
    exe = shutil.which("redis-server")
    if exe is None:
        message = "redis-server is not installed: apt-get install -y redis-server"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    proc = subprocess.Popen(
        [*prefix, exe, "--port", str(port), "--bind", bind, "--save", "", "--appendonly", "no",
         "--protected-mode", "no"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 30  # a hang guard only
    seen = b""
    while b"Ready to accept connections" not in seen:
        line = proc.stdout.readline()
        if not line or time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"redis-server did not start: {seen[-500:]!r}", pytrace=False)
        seen += line
    return proc


def stop(proc: subprocess.Popen[bytes], sig_kill: bool = False) -> None:
    """Terminate (or kill) and reap a process we started."""
    if proc.poll() is None:
        proc.kill() if sig_kill else proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X") and b"fastagent" in cmd


def running(presence: Path) -> dict[str, list[tuple[str, int]]]:
    """``bot -> [(node, pid)]`` of the fixture bots whose process is alive now."""
    out: dict[str, list[tuple[str, int]]] = {}
    for entry in presence.iterdir():
        try:
            bot, node, pid = entry.name.split("@")
        except ValueError:
            continue
        if _alive(int(pid)):
            out.setdefault(bot, []).append((node, int(pid)))
    return out


def node_env(tmp: Path, node: str, binary: Path, redis_url: str) -> dict[str, str]:
    """The environment of one node's ``agentrt bots supervise`` (its own instances directory)."""
    home = tmp / f"home-{node}"
    home.mkdir(parents=True, exist_ok=True)
    (home / "bots.toml").write_text(CONFIG)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "AGENTRT_LOAD_PLUGINS": "fastagent",
        "AGENTRT_BOTS_CONFIG": str(home / "bots.toml"),
        "XDG_DATA_HOME": str(home / "xdg"),
        "FASTAGENT_BINARY_PATH": str(binary),
        "TEST_FASTAGENT_KEY": "sk-node-secret",
        "AGENTRT_BOTS_REDIS_URL": redis_url,
    }
