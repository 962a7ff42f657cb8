"""The public replay server (agentrt.testing.serve_replay) itself, seen from raw sockets and httpx."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from agentrt.testing import ReplayRequest, ReplayResponse, serve_replay


async def raw_exchange(port: int, request: bytes) -> tuple[list[bytes], bytes]:
    """Send ``request``; return the pieces as received and everything joined."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    pieces: list[bytes] = []
    async with stream:
        await stream.send_all(request)
        with trio.fail_after(30):
            while data := await stream.receive_some(65536):
                pieces.append(data)
    return pieces, b"".join(pieces)


GET = b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n"


async def test_list_script_in_order_then_404() -> None:
    script = [ReplayResponse.json({"n": 1}), ReplayResponse.json({"n": 2})]
    async with serve_replay(script) as server, httpx.AsyncClient() as client:
        got = [(await client.get(server.url + "/a")).json() for _ in range(2)]
        extra = await client.get(server.url + "/a")
    assert got == [{"n": 1}, {"n": 2}]
    assert extra.status_code == 404
    assert server.unexpected == 1
    assert len(server.requests) == 3


async def test_async_callable_script_and_recorded_request() -> None:
    async def answer(request: ReplayRequest) -> ReplayResponse:
        await trio.sleep(0)
        return ReplayResponse.json({"echo": request.json, "path": request.path})

    async with serve_replay(answer) as server, httpx.AsyncClient() as client:
        response = await client.post(server.url + "/v1/p?q=1", json={"a": [1, 2]}, headers={"X-Thing": "V"})
    assert response.json() == {"echo": {"a": [1, 2]}, "path": "/v1/p?q=1"}
    (req,) = server.requests
    assert req.method == "POST"
    assert req.header("x-thing") == "V"
    assert req.header("X-THING") == "V"
    assert req.json == {"a": [1, 2]}


async def test_chunked_request_body_is_read() -> None:
    async with serve_replay([ReplayResponse.json({})]) as server:
        body = b"POST / HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        await raw_exchange(server.port, body)
    assert server.requests[0].body == b"abcde"


async def test_chunks_are_sent_separately_with_pauses() -> None:
    response = ReplayResponse.sse([b"data: 1\n\n", b"data: 2\n\n"], chunk_delay=0.2)
    async with serve_replay([response]) as server:
        pieces, whole = await raw_exchange(server.port, GET)
    # The pause means the second chunk arrives in its own read.
    assert any(p.startswith(b"9\r\ndata: 2") for p in pieces)
    assert whole.endswith(b"9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n")
    assert b"\r\ncontent-type: text/event-stream\r\n" in whole


async def test_content_length_framing_sends_body_verbatim() -> None:
    response = ReplayResponse(headers=[("Content-Length", "5"), ("X-Case", "Kept")], chunks=[b"he", b"llo"])
    async with serve_replay([response]) as server:
        _, whole = await raw_exchange(server.port, GET)
    assert whole.startswith(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Case: Kept\r\n")
    assert whole.endswith(b"\r\n\r\nhello")
    assert b"transfer-encoding" not in whole


async def test_disconnect_mid_body_and_delay() -> None:
    response = ReplayResponse.sse(b"data: 0123456789\n\n", disconnect_after=8, delay=0.05)
    async with serve_replay([response]) as server:
        _, whole = await raw_exchange(server.port, GET)
    # Eight body bytes in their chunk frame, then the connection closed: no final 0-chunk.
    assert whole.endswith(b"\r\n\r\n8\r\ndata: 01\r\n")


async def test_dropped_gets_nothing() -> None:
    async with serve_replay([ReplayResponse.dropped()]) as server:
        _, whole = await raw_exchange(server.port, GET)
    assert whole == b""
    assert len(server.requests) == 1


async def test_bad_request_is_counted_not_recorded() -> None:
    async with serve_replay([ReplayResponse.json({})]) as server:
        await raw_exchange(server.port, b"NONSENSE\r\n\r\n")
    assert server.bad_requests == 1
    assert server.requests == []


async def test_wait_for_requests_is_bounded() -> None:
    async with serve_replay([]) as server:
        with pytest.raises(trio.TooSlowError):
            await server.wait_for_requests(1, limit=0.05)


async def test_errors_in_the_block_propagate_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with serve_replay([]):
            raise KeyError("mine")


def test_from_capture_parses_headers_and_recomputes_length() -> None:
    raw = b"HTTP/1.1 201 Created\r\nX-A: 1\r\ncontent-length: 999\r\n\r\nbody"
    response = ReplayResponse.from_capture(raw)
    assert (response.status, response.reason, response.body) == (201, "Created", b"body")
    assert response.headers == (("X-A", "1"), ("content-length", "4"))
    with pytest.raises(ValueError):
        ReplayResponse.from_capture(b"no blank line")
    with pytest.raises(ValueError):
        ReplayResponse.from_capture(b"garbage\r\n\r\n")
    assert ReplayResponse(chunks=b"abcdefg").split(3).chunks == (b"abc", b"def", b"g")


async def test_two_round_conversation_script(kit: Any) -> None:
    """The pattern the agent tests use: a round asking for a tool, then a round with text."""
    from agentrt.provider import FinishChunk, TextChunk, ToolCall, ToolCallsChunk
    from agentrt_openai import OpenAIProvider

    raw = kit.capture("fakellm-tools-stream.sse")
    call_id = kit.tool_call_id(raw)
    tool_round = ReplayResponse.sse(raw)
    text_round = ReplayResponse.sse(kit.capture("litellm-mock-text-stream.sse")).split(50)
    async with serve_replay([tool_round, text_round]) as server:
        async with OpenAIProvider(kit.config(server.url)) as provider:
            first = await kit.collect(provider, kit.request(tools=[kit.WEATHER]))
            messages = [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": call_id}]},
                {"role": "tool", "tool_call_id": call_id, "content": '{"temp": 21}'},
            ]
            second = await kit.collect(provider, kit.request(messages=messages, tools=[kit.WEATHER]))
        one, two = await server.wait_for_requests(2)
    assert first[0] == ToolCallsChunk(
        calls=(ToolCall(id=call_id, name="get_weather", arguments='{"city": "Paris"}'),)
    )
    assert "".join(c.text for c in second if isinstance(c, TextChunk)).startswith("Hello from")
    assert second[-1] == FinishChunk(reason="stop")
    assert two.json["messages"][-1]["role"] == "tool"
    assert one.header("idempotency-key") != two.header("idempotency-key")
