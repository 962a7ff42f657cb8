"""``agentrt web -a NAME``: the web UI's chats talk to a named agent of the config file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agentrt.errors import AgentrtError
from agentrt_web._server import WebOptions, serve_web


def _env(tmp: Path, agent: Path) -> dict[str, str]:
    config = tmp / "config.toml"
    config.write_text(f'[agents.fx]\nexecutable = "{agent}"\nmodel = "web-model"\n')
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(config), "AGENTRT_DATABASE_URL": f"sqlite://{tmp / 'agentrt.db'}",
        "AGENTRT_BOTS_CONFIG": str(tmp / "no-bots.toml"),
    }


async def test_web_resolves_the_named_agent_and_records_its_name(tmp_path: Path, agent: Path) -> None:
    env = _env(tmp_path, agent)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        opts = WebOptions(host="127.0.0.1", port=0, supervise_bots=False, agent="fx")
        state = await nursery.start(lambda task_status: serve_web(opts, env=env, stop=stop, task_status=task_status))
        assert state.chats.launch.executable == str(agent)
        assert state.chats.launch.model == "web-model"
        assert state.chats.agent == "fx"
        stop.set()
    with pytest.raises(AgentrtError) as info:
        await serve_web(WebOptions(host="127.0.0.1", port=0, supervise_bots=False, agent="nope"), env=env)
    assert info.value.code == "unknown_agent"


def test_web_with_an_unknown_agent_exits_2(tmp_path: Path, agent: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "agentrt", "web", "--port", "0", "-a", "nope"],
                          env=_env(tmp_path, agent), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr.startswith("agentrt: error: unknown_agent: no agent named 'nope'")
