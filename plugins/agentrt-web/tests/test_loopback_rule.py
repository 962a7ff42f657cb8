"""The web UI's ``Host`` check follows the one loopback rule (``agentrt.net``, loose mode).

A real ``agentrt web`` on loopback; every row of the core table is sent as the
``Host`` header: loopback names are served, anything else gets 421 (DNS rebinding).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.core.test_loopback import TABLE

from .conftest import base_env


def test_host_check_follows_the_loose_loopback_rule(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    seen: dict[str, int] = {}
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        for host, loose, _strict in TABLE:
            status = c.get("/api/threads", headers={"host": f"{host}:8000"}).status_code
            seen[host] = status
            assert (status != 421) is loose, (host, status)
    assert seen["127.0.0.2"] == 200 and seen["0.0.0.0"] == 421
