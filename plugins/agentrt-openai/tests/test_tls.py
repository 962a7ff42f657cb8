"""HTTPS against the replay server with a trustme CA: verified, and refused without the CA."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
import trustme

from agentrt.errors import AgentrtError
from agentrt.provider import FinishChunk, TextChunk
from agentrt.testing import ReplayResponse, serve_replay
from agentrt_openai import OpenAIConfig, OpenAIProvider, from_env

BODY = b'data: {"choices":[{"delta":{"content":"secure"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    return ctx


async def test_https_with_the_right_ca(kit: Any, ca: trustme.CA) -> None:
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    async with serve_replay([ReplayResponse.sse(BODY)], ssl_context=server_context(ca)) as server:
        assert server.url.startswith("https://127.0.0.1:")
        config = from_env({"AGENTRT_API_BASE_URL": server.url + "/v1", "AGENTRT_API_TOKEN": kit.TOKEN})
        provider = OpenAIProvider(config, verify=client_ctx)
        chunks = await kit.collect(provider)
        await provider.aclose()
    assert chunks == [TextChunk(text="secure"), FinishChunk(reason="stop")]
    assert server.requests[0].header("authorization") == f"Bearer {kit.TOKEN}"


async def test_unknown_ca_is_refused_without_retry(kit: Any, ca: trustme.CA) -> None:
    async with serve_replay([ReplayResponse.sse(BODY)] * 3, ssl_context=server_context(ca)) as server:
        provider = OpenAIProvider(OpenAIConfig(base_url=server.url + "/v1", token=kit.TOKEN, retry_backoff_s=0.01))
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
        await provider.aclose()
    assert info.value.code == "provider_tls_failed"
    assert server.requests == []  # the token was never sent
    assert kit.TOKEN not in str(info.value)
