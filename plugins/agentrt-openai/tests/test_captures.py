"""Every real capture in captures/openai-sse, replayed byte-exact over loopback HTTP.

The expected values below were read off the captures by hand, except what the servers draw at
random on each recording (tool call ids, the date header): those are read from the capture's own
bytes, so the test checks that they pass through unchanged.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import pytest

from agentrt.errors import AgentrtError
from agentrt.events import Usage
from agentrt.provider import FinishChunk, TextChunk, ToolCall, ToolCallsChunk, UsageChunk
from agentrt.testing import ReplayResponse, serve_replay
from agentrt_openai import OpenAIProvider

CUTS = [None, 2, 7, 64, 1000]


def cut(response: ReplayResponse, size: int | None) -> ReplayResponse:
    return response if size is None else response.split(size)


def summary(chunks: list[Any]) -> dict[str, Any]:
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    calls = [c.calls for c in chunks if isinstance(c, ToolCallsChunk)]
    usage = [c.usage for c in chunks if isinstance(c, UsageChunk)]
    finish = [c.reason for c in chunks if isinstance(c, FinishChunk)]
    assert isinstance(chunks[-1], FinishChunk), "the stream must end with its FinishChunk"
    return {"text": text, "calls": calls, "usage": usage, "finish": finish}


@pytest.mark.parametrize("size", CUTS)
async def test_llmock_tools_stream_with_headers(run: Any, kit: Any, size: int | None) -> None:
    raw = kit.capture("llmock-tools-stream.txt")
    response = ReplayResponse.from_capture(raw)
    assert response.status == 200
    assert ("content-type", "text/event-stream; charset=utf-8") in response.headers
    assert response.body.startswith(b"data: {")
    chunks, server = await run([cut(response, size)], kit.request(tools=[kit.WEATHER]))
    assert summary(chunks) == {
        "text": "",
        "calls": [
            (ToolCall(id=kit.tool_call_id(raw), name="get_weather", arguments='{"city": "mock-city"}'),)
        ],
        "usage": [Usage(input_tokens=5, output_tokens=5)],
        "finish": ["tool_calls"],
    }
    # Tool calls come once, before usage and the finish.
    assert [type(c).__name__ for c in chunks] == ["ToolCallsChunk", "UsageChunk", "FinishChunk"]
    assert server.requests[0].json["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("size", CUTS)
async def test_fakellm_tools_in_four_character_pieces(run: Any, kit: Any, size: int | None) -> None:
    raw = kit.capture("fakellm-tools-stream.sse")
    response = ReplayResponse.sse(raw)
    chunks, _ = await run([cut(response, size)])
    assert kit.tool_call_id(raw).startswith("call_")
    assert summary(chunks) == {
        "text": "",
        "calls": [(ToolCall(id=kit.tool_call_id(raw), name="get_weather", arguments='{"city": "Paris"}'),)],
        "usage": [],
        "finish": ["tool_calls"],
    }


@pytest.mark.parametrize("size", CUTS)
async def test_litellm_usage_chunk_with_nonempty_choices(run: Any, kit: Any, size: int | None) -> None:
    response = ReplayResponse.sse(kit.capture("litellm-mock-text-stream.sse"))
    chunks, _ = await run([cut(response, size)])
    assert summary(chunks) == {
        "text": "Hello from the LiteLLM mock. This is streamed in pieces.",
        "calls": [],
        "usage": [Usage(input_tokens=8, output_tokens=14)],
        "finish": ["stop"],
    }
    # One TextChunk per provider fragment (19 of them), as the agent emits one delta each.
    assert sum(isinstance(c, TextChunk) for c in chunks) == 19


@pytest.mark.parametrize("size", CUTS)
async def test_fakellm_spaces_in_json_and_no_usage(run: Any, kit: Any, size: int | None) -> None:
    raw = kit.capture("fakellm-text-stream.sse")
    assert b'"delta": {"content": " from"}' in raw  # spaces after separators, as Python's json writes
    response = ReplayResponse.sse(raw)
    chunks, server = await run([cut(response, size)])
    # the provider asks for usage, as record.py's request did; the server sent none: no usage, no error
    assert server.requests[0].json["stream_options"] == {"include_usage": True}
    assert summary(chunks) == {
        "text": "Hello from fakellm, one word at a time.",
        "calls": [],
        "usage": [],
        "finish": ["stop"],
    }
    assert sum(isinstance(c, TextChunk) for c in chunks) == 8  # one per word


@pytest.mark.parametrize("size", CUTS)
async def test_llmock_truncated_stream_is_an_error(kit: Any, size: int | None) -> None:
    response = ReplayResponse.sse(kit.capture("llmock-fault-truncate.sse"))
    got: list[Any] = []
    async with serve_replay([cut(response, size)]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        with pytest.raises(AgentrtError) as info:
            async with aclosing(provider.stream(kit.request())) as chunks:
                async for chunk in chunks:
                    got.append(chunk)
        await provider.aclose()
    assert info.value.code == "provider_stream_truncated"
    # The text that did arrive was passed on before the failure; no finish was claimed.
    assert got == [TextChunk(text="Simulated ")]


async def test_replayed_bytes_are_exact(kit: Any) -> None:
    """The replay server sends the capture's body bytes unchanged (read back with a raw socket)."""
    import trio

    raw = kit.capture("llmock-tools-stream.txt")
    response = ReplayResponse.from_capture(raw)
    async with serve_replay([response]) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
            received = bytearray()
            with trio.fail_after(30):
                while data := await stream.receive_some(65536):
                    received += data
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    date = next(line for line in raw.split(b"\r\n") if line.startswith(b"date: "))  # the recording's
    assert head.startswith(b"HTTP/1.1 200 OK\r\n" + date + b"\r\nserver: uvicorn\r\n")
    # De-chunk and compare with the capture's body.
    decoded = bytearray()
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        decoded += body[:size]
        body = body[size + 2 :]
    assert bytes(decoded) == raw.partition(b"\r\n\r\n")[2]
    assert server.requests[0].json == {}
