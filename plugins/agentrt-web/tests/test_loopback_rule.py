"""The web UI's ``Host`` check follows the one loopback rule (``agentrt.net``, loose mode).

A real ``agentrt web`` on loopback; each host of the core's table (``tests/core/test_loopback.py``) is sent
as the ``Host`` header: what ``agentrt.net.is_loopback_host`` calls loopback is served, anything else gets
421 (DNS rebinding).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from agentrt.net import is_loopback_host

from .conftest import base_env

# The hosts of the core's table, the tricky ones included (brackets, mapped and unparsable addresses).
HOSTS = [
    "localhost", "LOCALHOST", "127.0.0.1", "[::1]", "[0:0:0:0:0:0:0:1]", "127.0.0.2", "127.255.255.254",
    "[::ffff:127.0.0.1]", "0.0.0.0", "[::]", "localhost.evil", "evil.localhost.example", "10.0.0.1", "[::2]",
    "[fe80::1]", "example.com", "127.1",
]


def test_host_check_follows_the_loose_loopback_rule(tmp_path: Path, agent: Path, server_factory: Any) -> None:
    srv = server_factory(base_env(tmp_path, agent))
    seen: dict[str, int] = {}
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        for host in HOSTS:
            loose = is_loopback_host(host)
            status = c.get("/api/threads", headers={"host": f"{host}:8000"}).status_code
            seen[host] = status
            assert (status != 421) is loose, (host, status)
    assert seen["127.0.0.2"] == 200 and seen["0.0.0.0"] == 421
