"""Provider errors name the endpoint (scheme://host:port only) and the HTTP status (real loopback server)."""

from __future__ import annotations

from typing import Any

import pytest

from agentrt.errors import AgentrtError
from agentrt.testing import ReplayResponse, serve_replay
from agentrt_openai import OpenAIProvider
from agentrt_openai._provider import endpoint_origin


@pytest.mark.parametrize("status", [401, 500, 429])
async def test_http_error_names_endpoint_and_status(kit: Any, status: int) -> None:
    body = ReplayResponse.json({"error": {"code": "nope", "message": "details"}}, status=status)
    async with serve_replay([body]) as server:
        provider = OpenAIProvider(kit.config(server.url, max_retries=0))
        try:
            with pytest.raises(AgentrtError) as info:
                await kit.collect(provider)
        finally:
            await provider.aclose()
    err = info.value
    assert err.code == f"provider_http_{status}"
    assert f"http://127.0.0.1:{server.port} answered HTTP {status}" in err.detail
    # The origin only: no path, no token.
    assert "/v1" not in err.detail and "/chat/completions" not in err.detail
    assert kit.TOKEN not in err.detail and "Bearer" not in err.detail


async def test_connection_failure_names_endpoint(kit: Any) -> None:
    async with serve_replay([]) as server:
        url = server.url
    provider = OpenAIProvider(kit.config(url, max_retries=0))  # the server is gone: nothing listens there
    try:
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
    finally:
        await provider.aclose()
    assert info.value.code == "provider_connection_failed"
    assert url.rstrip("/") in info.value.detail


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://api.example.com/v1/chat/completions?key=secret", "https://api.example.com:443"),
        ("http://user:pw@127.0.0.1:8080/v1/x", "http://127.0.0.1:8080"),
        ("http://[::1]/v1", "http://[::1]:80"),
    ],
)
def test_endpoint_origin_drops_credentials_path_and_query(url: str, origin: str) -> None:
    assert endpoint_origin(url) == origin
