"""The web UI without the FastAgent plugin (its optional ``bots`` extra): chat works, bots are absent.

``agentrt_fastagent`` is made unimportable for the server process by a
shadowing package on ``PYTHONPATH`` that raises ``ImportError``, as a missing
distribution would; its entry point is disabled the way a user would.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import httpx

from .conftest import base_env, write_bots

HERE = Path(__file__).resolve().parent


def test_the_web_plugin_declares_fastagent_as_its_bots_extra() -> None:
    meta = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["project"]
    assert meta["optional-dependencies"]["bots"] == ["agentrt-fastagent"]
    assert not any(d.startswith("agentrt-fastagent") for d in meta["dependencies"])


def test_without_the_fastagent_plugin_the_web_ui_serves_chat_and_hides_bots(
    tmp_path: Path, agent: Path, server_factory: Any
) -> None:
    shadow = tmp_path / "shadow" / "agentrt_fastagent"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('agentrt-fastagent is not installed')\n")
    # A valid bots configuration: with the plugin installed, the Bots pages would be on.
    env = base_env(tmp_path, agent, PYTHONPATH=str(shadow.parent), AGENTRT_DISABLE_PLUGINS="fastagent",
                   AGENTRT_BOTS_CONFIG=str(write_bots(tmp_path)))
    srv = server_factory(env, "--no-bots")
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        home = c.get("/", headers={"accept": "text/html"})
        assert home.status_code == 200
        assert 'href="/bots"' not in home.text
        assert c.get("/api/threads").status_code == 200
        bots = c.get("/bots", headers={"accept": "text/html"})
        assert bots.status_code < 500
    assert b"Traceback" not in srv.output
