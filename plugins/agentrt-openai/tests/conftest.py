"""Shared helpers for the OpenAI-compatible provider tests: run a request against a replay server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from agentrt.provider import ProviderChunk, ProviderRequest, ToolSchema
from agentrt.testing import ReplayResponse, ReplayServer, serve_replay
from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
from agentrt_openai import OpenAIConfig, OpenAIProvider

# Recorded by captures/openai-sse/record.py from mock servers on loopback (see its README).
FIXTURES = Path(__file__).resolve().parent / "captures" / "openai-sse"
TOKEN = "sk-test-4f9a0c1d-secret-value"


def request(**kwargs: Any) -> ProviderRequest:
    kwargs.setdefault("model", "test-model")
    kwargs.setdefault("messages", [{"role": "user", "content": "hello"}])
    return ProviderRequest(**kwargs)


def config(url: str, **kwargs: Any) -> OpenAIConfig:
    kwargs.setdefault("token", TOKEN)
    kwargs.setdefault("timeout_s", 10.0)
    kwargs.setdefault("retry_backoff_s", 0.01)
    return OpenAIConfig(base_url=url + "/v1", **kwargs)


async def collect(provider: OpenAIProvider, req: ProviderRequest | None = None) -> list[ProviderChunk]:
    async with aclosing(provider.stream(req or request())) as chunks:
        return [chunk async for chunk in chunks]


Run = Callable[..., Awaitable[tuple[list[ProviderChunk], ReplayServer]]]


@pytest.fixture
def run() -> Run:
    """``await run(responses, request=..., **config)``: one provider request against a replay server."""

    async def _run(
        responses: Sequence[ReplayResponse] | Any, req: ProviderRequest | None = None, **cfg: Any
    ) -> tuple[list[ProviderChunk], ReplayServer]:
        async with serve_replay(responses) as server:
            provider = OpenAIProvider(config(server.url, **cfg))
            try:
                return await collect(provider, req), server
            finally:
                await provider.aclose()

    return _run


class Kit:
    """Helpers handed to tests as the ``kit`` fixture (test modules cannot import each other)."""

    FIXTURES = FIXTURES
    TOKEN = TOKEN
    WEATHER = ToolSchema(
        name="get_weather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    request = staticmethod(request)
    config = staticmethod(config)
    collect = staticmethod(collect)

    @staticmethod
    def capture(name: str) -> bytes:
        return (FIXTURES / name).read_bytes()

    @staticmethod
    def tool_call_id(raw: bytes) -> str:
        """The first tool call id in a capture's stream, as the server wrote it (drawn anew per recording)."""
        import json

        for line in raw.splitlines():
            if line.startswith(b"data: {") and b"tool_calls" in line:
                for call in json.loads(line[6:])["choices"][0]["delta"]["tool_calls"]:
                    if "id" in call:
                        return str(call["id"])
        raise AssertionError("no tool call id in the capture")

    @staticmethod
    def sse(*events: Any, done: bool = True) -> bytes:
        """SSE bytes: one ``data:`` event per object (dicts are JSON-encoded)."""
        import json

        out = b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)
        return out + (b"data: [DONE]\n\n" if done else b"")


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
