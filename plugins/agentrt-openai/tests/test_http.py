"""The HTTP side: request shape, redirects, statuses, retries, timeouts, caps, secrets."""

from __future__ import annotations

import socket
from contextlib import aclosing
from typing import Any

import pytest
import trio

from agentrt.errors import AgentrtError
from agentrt.events import Usage
from agentrt.provider import FinishChunk, TextChunk, ToolCall, ToolCallsChunk, UsageChunk
from agentrt.testing import ReplayRequest, ReplayResponse, serve_replay
from agentrt_openai import OpenAIConfig, OpenAIProvider
from agentrt_openai._retry import retry_after_seconds

OK_BODY = (
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def ok() -> ReplayResponse:
    return ReplayResponse.sse(OK_BODY)


def assert_no_secret(err: BaseException, token: str) -> None:
    for text in (str(err), repr(err), getattr(err, "detail", "")):
        assert token not in text
        assert "Bearer" not in text


async def fails(run: Any, kit: Any, responses: Any, **cfg: Any) -> AgentrtError:
    with pytest.raises(AgentrtError) as info:
        await run(responses, **cfg)
    assert_no_secret(info.value, kit.TOKEN)
    return info.value


async def test_request_shape(run: Any, kit: Any) -> None:
    chunks, server = await run([ok()], kit.request(tools=[kit.WEATHER], idempotency_key="turn-1:round-0"))
    assert chunks == [TextChunk(text="ok"), FinishChunk(reason="stop")]
    (req,) = server.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.header("accept") == "text/event-stream, application/json"
    assert req.header("content-type") == "application/json"
    assert (req.header("user-agent") or "").startswith("agentrt/")
    assert req.header("authorization") == f"Bearer {kit.TOKEN}"
    assert req.header("idempotency-key") == "turn-1:round-0"
    assert req.json == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    }


async def test_no_token_no_authorization_and_no_tools_key(run: Any) -> None:
    _, server = await run([ok()], token=None)
    (req,) = server.requests
    assert req.header("authorization") is None
    assert "tools" not in req.json
    assert len(req.header("idempotency-key") or "") == 36  # a fresh uuid4


async def test_fresh_key_per_request_same_key_across_retries(kit: Any) -> None:
    busy = ReplayResponse(status=429, headers=[("retry-after-ms", "10"), ("content-length", "0")])
    async with serve_replay([busy, ok(), ok()]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        assert await kit.collect(provider) == [TextChunk(text="ok"), FinishChunk(reason="stop")]
        await kit.collect(provider)
        await provider.aclose()
    keys = [r.header("idempotency-key") for r in server.requests]
    assert len(keys) == 3
    assert keys[0] == keys[1], "a retry repeats its request's key"
    assert keys[2] != keys[0], "a new request gets a new key"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirects_are_rejected(run: Any, kit: Any, status: int) -> None:
    redirect = ReplayResponse(status=status, headers=[("location", "http://127.0.0.1:1/x"), ("content-length", "0")])
    err = await fails(run, kit, [redirect, ok()])
    assert err.code == "provider_redirect_rejected"


async def test_redirect_not_followed_nor_retried(kit: Any) -> None:
    redirect = ReplayResponse(status=307, headers=[("location", "/v1/chat/completions"), ("content-length", "0")])
    async with serve_replay([redirect, ok()]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        with pytest.raises(AgentrtError):
            await kit.collect(provider)
        await provider.aclose()
    assert len(server.requests) == 1


async def test_429_retry_after_ms_then_success(run: Any) -> None:
    busy = ReplayResponse.json({"error": {"message": "slow down", "code": "rate_limited"}}, status=429)
    busy = ReplayResponse(status=429, headers=busy.headers + (("retry-after-ms", "150"),), chunks=busy.chunks)
    start = trio.current_time()
    chunks, server = await run([busy, ok()])
    waited = trio.current_time() - start
    assert chunks[-1] == FinishChunk(reason="stop")
    assert len(server.requests) == 2
    assert waited >= 0.14, "the server's Retry-After was honoured"


async def test_429_retry_after_seconds_then_success(run: Any) -> None:
    busy = ReplayResponse(status=429, headers=[("retry-after", "1"), ("content-length", "0")])
    start = trio.current_time()
    chunks, server = await run([busy, ok()])
    assert trio.current_time() - start >= 0.95
    assert len(server.requests) == 2 and chunks[-1] == FinishChunk(reason="stop")


async def test_retry_wait_is_capped(run: Any) -> None:
    busy = ReplayResponse(status=503, headers=[("retry-after", "3600"), ("content-length", "0")])
    chunks, server = await run([busy, ok()], retry_wait_max_s=0.05, timeout_s=30.0)
    assert len(server.requests) == 2 and chunks[-1] == FinishChunk(reason="stop")


async def test_wait_beyond_the_deadline_fails_at_once(run: Any, kit: Any) -> None:
    # The server asks for an hour, the request has ten minutes and the cap allows the hour: a provider
    # that slept toward a wait it cannot finish would trip the hang guard, one that fails at once does not.
    busy = ReplayResponse(status=429, headers=[("retry-after", "3600"), ("content-length", "0")])
    with trio.fail_after(60):
        err = await fails(run, kit, [busy, ok()], timeout_s=600.0, retry_wait_max_s=7200.0)
    assert err.code == "provider_http_429"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
async def test_retryable_statuses_are_bounded(kit: Any, status: int) -> None:
    fail = ReplayResponse(status=status, headers=[("content-length", "0")])
    async with serve_replay([fail] * 5) as server:
        provider = OpenAIProvider(kit.config(server.url, max_retries=2))
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
        await provider.aclose()
    assert info.value.code == f"provider_http_{status}"
    assert len(server.requests) == 3  # the first try and two retries


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(kit: Any, status: int) -> None:
    secret = "your key sk-abcdef is invalid"
    fail = ReplayResponse.json({"error": {"message": secret, "code": "invalid_api_key"}}, status=status)
    async with serve_replay([fail, ok()]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
        await provider.aclose()
    assert info.value.code == f"provider_http_{status}"
    assert "invalid_api_key" in info.value.detail  # the safe code from the body
    # An excerpt of the body's message says why, a key in it masked (never a secret).
    assert info.value.detail.endswith("(invalid_api_key): your key **** is invalid")
    assert "sk-abcdef" not in str(info.value)
    assert len(server.requests) == 1


async def test_failure_after_first_body_byte_is_not_retried(kit: Any) -> None:
    body = OK_BODY[:60]
    broken = ReplayResponse.sse(OK_BODY, disconnect_after=len(body))
    async with serve_replay([broken, ok()]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
        await provider.aclose()
    assert info.value.code == "provider_stream_interrupted"
    assert len(server.requests) == 1


async def test_server_error_inside_the_stream_is_not_retried(kit: Any) -> None:
    body = OK_BODY.split(b"\n\n")[0] + b'\n\ndata: {"error": {"code": 500, "message": "internal"}}\n\n'
    async with serve_replay([ReplayResponse.sse(body), ok()]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
        await provider.aclose()
    assert info.value.code == "provider_returned_error"
    assert len(server.requests) == 1


async def test_dropped_connections_before_any_response_are_retried(run: Any) -> None:
    chunks, server = await run([ReplayResponse.dropped(), ReplayResponse.dropped(), ok()], max_retries=2)
    assert chunks[-1] == FinishChunk(reason="stop")
    assert len(server.requests) == 3


async def test_dropped_connections_exhaust_retries(run: Any, kit: Any) -> None:
    err = await fails(run, kit, [ReplayResponse.dropped()] * 3, max_retries=2)
    assert err.code == "provider_connection_failed"


async def test_connection_refused_is_retried_then_fails() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    attempts: list[float] = []

    import stamina.instrumentation as instr

    def hook(details: Any) -> None:
        attempts.append(details.wait_for)

    previous = instr.get_on_retry_hooks()
    instr.set_on_retry_hooks([hook])
    try:
        token = "sk-refused-secret"
        provider = OpenAIProvider(
            OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", token=token, retry_backoff_s=0.01, max_retries=2)
        )
        with pytest.raises(AgentrtError) as info:
            async with aclosing(provider.stream(ProviderRequestFactory.make())) as chunks:
                async for _ in chunks:
                    pass
        await provider.aclose()
    finally:
        instr.set_on_retry_hooks(previous)
    assert info.value.code == "provider_connection_failed"
    assert len(attempts) == 2, "two retries were scheduled"
    assert_no_secret(info.value, token)


class ProviderRequestFactory:
    @staticmethod
    def make() -> Any:
        from agentrt.provider import ProviderRequest

        return ProviderRequest(model="m", messages=[{"role": "user", "content": "x"}])


async def test_timeout_before_first_byte(run: Any, kit: Any) -> None:
    err = await fails(run, kit, [ReplayResponse.sse(OK_BODY, delay=5.0)], timeout_s=0.3)
    assert err.code == "provider_timeout"


async def test_timeout_while_streaming(run: Any, kit: Any) -> None:
    slow = ReplayResponse.sse(OK_BODY.split(b"\n\n")[:1] + [b"\n\n", OK_BODY], chunk_delay=5.0)
    err = await fails(run, kit, [slow], timeout_s=0.5)
    assert err.code == "provider_timeout"


async def test_non_streamed_json_completion(run: Any) -> None:
    completion = {
        "id": "x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"k":1}'}}
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 2},
    }
    chunks, _ = await run([ReplayResponse.json(completion)])
    assert chunks == [
        TextChunk(text="Let me check."),
        ToolCallsChunk(calls=(ToolCall(id="call_a", name="f", arguments='{"k":1}'),)),
        UsageChunk(usage=Usage(input_tokens=12, output_tokens=2)),
        FinishChunk(reason="tool_calls"),
    ]


async def test_non_streamed_bad_json(run: Any, kit: Any) -> None:
    bad = ReplayResponse(status=200, headers=[("content-type", "application/json")], chunks=b"{not json")
    assert (await fails(run, kit, [bad])).code == "provider_response_invalid_json"


async def test_non_streamed_error_object(run: Any, kit: Any) -> None:
    err = await fails(run, kit, [ReplayResponse.json({"error": {"message": "nope", "type": "invalid_request"}})])
    assert err.code == "provider_returned_error"


async def test_body_cap_streamed(run: Any, kit: Any) -> None:
    padding = b": " + b"p" * (1024 * 1024 - 3) + b"\n"
    body = [padding] * 9 + [OK_BODY]
    err = await fails(run, kit, [ReplayResponse.sse(body)])
    assert err.code == "provider_response_oversize"


async def test_body_cap_non_streamed(run: Any, kit: Any) -> None:
    big = b'{"x": "' + b"a" * (8 * 1024 * 1024) + b'"}'
    err = await fails(run, kit, [ReplayResponse(headers=[("content-type", "application/json")], chunks=big)])
    assert err.code == "provider_response_oversize"


async def test_early_exit_closes_the_response(kit: Any) -> None:
    # The consumer stops after the first chunk; the stream must close without reading the rest.
    slow = ReplayResponse.sse([OK_BODY.split(b"\n\n")[0] + b"\n\n", OK_BODY], chunk_delay=30.0)
    async with serve_replay([slow]) as server:
        provider = OpenAIProvider(kit.config(server.url))
        with trio.fail_after(20):  # a hang guard: the rest of the body is 30 s away
            async with aclosing(provider.stream(kit.request())) as chunks:
                async for chunk in chunks:
                    assert chunk == TextChunk(text="ok")
                    break
        await provider.aclose()


async def test_callable_script_sees_each_request(kit: Any) -> None:
    seen: list[str] = []

    def answer(request: ReplayRequest) -> ReplayResponse:
        seen.append(request.json["messages"][-1]["content"])
        return ok()

    async with serve_replay(answer) as server:
        provider = OpenAIProvider(kit.config(server.url))
        await kit.collect(provider, kit.request(messages=[{"role": "user", "content": "one"}]))
        await kit.collect(provider, kit.request(messages=[{"role": "user", "content": "two"}]))
        await provider.aclose()
        assert len(await server.wait_for_requests(2)) == 2
    assert seen == ["one", "two"]


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "junk", "retry-after": "2"}) == 2.0
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert retry_after_seconds({"retry-after": "Tue, 14 Nov 2023 22:13:30 GMT"}, now=now) == 10.0
    assert retry_after_seconds({"retry-after": "Tue, 14 Nov 2023 22:13:00 GMT"}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


async def test_unencodable_request_is_a_clear_error(run: Any, kit: Any) -> None:
    req = kit.request(messages=[{"role": "user", "content": object()}])
    with pytest.raises(AgentrtError) as info:
        await run([ok()], req)
    assert info.value.code == "provider_request_invalid"


async def test_token_never_logged(run: Any, kit: Any, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    busy = ReplayResponse(status=503, headers=[("retry-after-ms", "5"), ("content-length", "0")])
    await run([busy, ok()])
    with pytest.raises(AgentrtError):
        await run([ReplayResponse(status=401, headers=[("content-length", "0")])])
    assert caplog.records, "httpx and stamina log at least the requests and the retry"
    for record in caplog.records:
        assert kit.TOKEN not in record.getMessage()
        assert kit.TOKEN not in repr(record.__dict__)


async def test_concurrent_streams_share_one_provider(kit: Any) -> None:
    def answer(request: ReplayRequest) -> ReplayResponse:
        word = request.json["messages"][0]["content"]
        body = (
            b'data: {"choices":[{"delta":{"content":"' + word.encode() + b'"},"finish_reason":"stop"}]}\n\n'
            b"data: [DONE]\n\n"
        )
        return ReplayResponse.sse([body[:20], body[20:]], chunk_delay=0.02)

    results: dict[str, list[Any]] = {}
    async with serve_replay(answer) as server:
        provider = OpenAIProvider(kit.config(server.url))

        async def one(word: str) -> None:
            results[word] = await kit.collect(provider, kit.request(messages=[{"role": "user", "content": word}]))

        async with trio.open_nursery() as nursery:
            for word in ("alpha", "beta", "gamma"):
                nursery.start_soon(one, word)
        await provider.aclose()
    assert {w: r[0] for w, r in results.items()} == {w: TextChunk(text=w) for w in ("alpha", "beta", "gamma")}
    assert len({r.header("idempotency-key") for r in server.requests}) == 3


async def test_no_retries_when_disabled(kit: Any) -> None:
    busy = ReplayResponse(status=429, headers=[("retry-after-ms", "1"), ("content-length", "0")])
    async with serve_replay([busy, ok()]) as server:
        provider = OpenAIProvider(kit.config(server.url, max_retries=0))
        with pytest.raises(AgentrtError) as info:
            await kit.collect(provider)
        await provider.aclose()
    assert info.value.code == "provider_http_429"
    assert len(server.requests) == 1
