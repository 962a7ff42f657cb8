"""Against llmock (a real OpenAI-compatible mock server, run as a subprocess on loopback).

Its ``/_llmock/scenario`` API scripts the faults: 429 with Retry-After,
truncation, disconnects, malformed chunks, scripted tool calls.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentrt.errors import AgentrtError
from agentrt.provider import FinishChunk, ProviderRequest, TextChunk, ToolCallsChunk, UsageChunk
from agentrt_openai import OpenAIConfig, OpenAIProvider

LLMOCK = Path(sys.executable).parent / "llmock"
if not LLMOCK.exists():  # pragma: no cover - the dev venv has it
    LLMOCK = Path(shutil.which("llmock") or "llmock")

pytestmark = pytest.mark.skipif(not LLMOCK.exists(), reason="llmock is not installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llmock_url() -> Iterator[str]:
    port = _free_port()
    # An allow-listed environment: llmock needs only to find Python and a home.
    env = {k: v for k, v in {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}.items()}
    proc = subprocess.Popen(
        [str(LLMOCK), "serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llmock exited: {proc.stderr.read()[-2000:]!r}")  # type: ignore[union-attr]
            try:
                if httpx.get(url + "/_llmock/scenario", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llmock did not start within 30 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        assert proc.stderr is not None
        proc.stderr.close()


async def scenario(url: str, *behaviors: dict[str, Any]) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        (await client.post(url + "/_llmock/reset")).raise_for_status()
        if behaviors:
            response = await client.post(url + "/_llmock/scenario", json={"behaviors": list(behaviors)})
            response.raise_for_status()


async def served(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.get(url + "/_llmock/requests")
        response.raise_for_status()
        requests: list[dict[str, Any]] = response.json()["requests"]
        return requests


async def stream(url: str, **cfg: Any) -> list[Any]:
    cfg.setdefault("retry_backoff_s", 0.01)
    cfg.setdefault("timeout_s", 10.0)
    provider = OpenAIProvider(OpenAIConfig(base_url=url + "/v1", token="sk-llmock-token", **cfg))
    req = ProviderRequest(model="gpt-4o-mini", messages=[{"role": "user", "content": "weather?"}])
    try:
        async with aclosing(provider.stream(req)) as chunks:
            return [c async for c in chunks]
    finally:
        await provider.aclose()


def text(chunks: list[Any]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextChunk))


async def test_scripted_text_with_usage(llmock_url: str) -> None:
    await scenario(llmock_url, {"type": "reply", "text": "hi there"})
    chunks = await stream(llmock_url)
    assert text(chunks) == "hi there"
    assert chunks[-1] == FinishChunk(reason="stop")
    usage = [c.usage for c in chunks if isinstance(c, UsageChunk)]
    assert len(usage) == 1 and usage[0].output_tokens == 2
    (request,) = await served(llmock_url)
    assert request["body"]["stream_options"] == {"include_usage": True}


async def test_scripted_tool_call(llmock_url: str) -> None:
    await scenario(
        llmock_url,
        {"type": "reply", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    )
    chunks = await stream(llmock_url)
    (tools,) = [c for c in chunks if isinstance(c, ToolCallsChunk)]
    (call,) = tools.calls
    assert call.name == "get_weather"
    import json

    assert json.loads(call.arguments) == {"city": "Paris"}
    assert chunks[-1] == FinishChunk(reason="tool_calls")


async def test_429_with_retry_after_then_success(llmock_url: str) -> None:
    await scenario(
        llmock_url,
        {"type": "fail", "status": 429, "retry_after": 0.2, "times": 1},
        {"type": "reply", "text": "after the wait"},
    )
    chunks = await stream(llmock_url)
    assert text(chunks) == "after the wait"
    requests = await served(llmock_url)
    assert [r["status"] for r in requests] == [429, 200]
    assert requests[1]["started_at"] - requests[0]["ended_at"] >= 0.19  # retry-after-ms honoured


async def test_persistent_500_gives_up_after_the_retries(llmock_url: str) -> None:
    await scenario(llmock_url, {"type": "fail", "status": 500, "retry_after": 0, "times": None})
    with pytest.raises(AgentrtError) as info:
        await stream(llmock_url, max_retries=2)
    assert info.value.code == "provider_http_500"
    assert len(await served(llmock_url)) == 3


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("truncate", "provider_stream_truncated"),
        ("disconnect", "provider_stream_interrupted"),
        ("malformed", "provider_stream_malformed"),
    ],
)
async def test_stream_faults(llmock_url: str, kind: str, code: str) -> None:
    await scenario(llmock_url, {"type": "stream_fault", "kind": kind, "after_chunks": 2})
    with pytest.raises(AgentrtError) as info:
        await stream(llmock_url)
    assert info.value.code == code
    assert len(await served(llmock_url)) == 1, "a stream that began is never retried"


async def test_stall_hits_the_timeout(llmock_url: str) -> None:
    await scenario(llmock_url, {"type": "stream_fault", "kind": "stall", "after_chunks": 1, "stall_seconds": 5})
    with pytest.raises(AgentrtError) as info:
        await stream(llmock_url, timeout_s=0.5)
    assert info.value.code == "provider_timeout"
