"""``check_provider`` passes the built-in OpenAI provider and names what is wrong with broken ones.

The scripted replies are rendered as OpenAI's server-sent events and served from a
real loopback server; each broken provider wraps the real one and breaks one rule.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

import attrs
import orjson
import pytest
import trio

from agentrt.errors import AgentrtError
from agentrt.events import Usage
from agentrt.provider import (
    FinishChunk,
    ProviderChunk,
    ProviderRequest,
    TextChunk,
    ToolCall,
    ToolCallsChunk,
    UsageChunk,
)
from agentrt.testing import ReplayResponse, ScriptedReply, check_provider
from agentrt_openai import OpenAIProvider, from_env


def sse(reply: ScriptedReply) -> ReplayResponse:
    """``reply`` as an OpenAI-compatible streaming /chat/completions answer, one event per chunk."""

    def event(obj: Any) -> bytes:
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    chunks = [event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]})
              for text in reply.text]
    calls = [{"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
             for i, c in enumerate(reply.tool_calls)]
    if calls:
        chunks.append(event({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}))
    if reply.complete:
        chunks.append(event({"choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish}]}))
        if reply.usage is not None:
            usage = {"prompt_tokens": reply.usage.input_tokens, "completion_tokens": reply.usage.output_tokens}
            chunks.append(event({"choices": [], "usage": usage}))
        chunks.append(b"data: [DONE]\n\n")
    return ReplayResponse.sse(chunks)


def env_for(url: str) -> Mapping[str, str]:
    return {"AGENTRT_API_BASE_URL": url + "/v1"}


def openai(env: Mapping[str, str]) -> OpenAIProvider:
    # No retry waits, so that a scenario takes no longer than its exchange.
    return OpenAIProvider(attrs.evolve(from_env(env), max_retries=0, retry_backoff_s=0.0))


class Wrapped:
    """The real provider with one rule broken by ``stream``."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.inner = openai(env)
        self.kept: list[Any] = []

    async def aclose(self) -> None:
        await self.inner.aclose()


class Buffering(Wrapped):
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        async with aclosing(self.inner.stream(request)) as chunks:
            held = [c async for c in chunks]
        for chunk in held:
            yield chunk


class RawErrors(Wrapped):
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        try:
            async with aclosing(self.inner.stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except AgentrtError as exc:
            raise RuntimeError(exc.detail) from None


class NoFinish(Wrapped):
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        async with aclosing(self.inner.stream(request)) as chunks:
            async for chunk in chunks:
                if not isinstance(chunk, FinishChunk):
                    yield chunk


class TextAfterFinish(Wrapped):
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        async with aclosing(self.inner.stream(request)) as chunks:
            async for chunk in chunks:
                yield chunk
        yield TextChunk(text=" and more")


class LeakyErrors(Wrapped):
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        try:
            async with aclosing(self.inner.stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except AgentrtError as exc:
            raise AgentrtError(exc.code, f"{exc.detail} (server: sk-checkprovider-0123456789abcdefSECRET)") from None


class NeverCloses(Wrapped):
    """Leaves the HTTP stream open when its own stream is closed (and keeps it from the collector)."""

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        inner = self.inner.stream(request)
        self.kept.append(inner)
        async for chunk in inner:
            yield chunk


class BadFactoryReply(Wrapped):
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        async with aclosing(self.inner.stream(request)) as chunks:
            async for chunk in chunks:
                yield "not a chunk" if isinstance(chunk, TextChunk) else chunk  # type: ignore[misc]


async def test_the_builtin_openai_provider_conforms() -> None:
    await check_provider(openai, render=sse, env=env_for)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (Buffering, "stream closed early: no text arrived while the rest of the reply was held back"),
        (RawErrors, "HTTP 401 answer: raised a raw RuntimeError"),
        (NoFinish, "text reply: yielded 0 FinishChunks"),
        (TextAfterFinish, "text reply: yielded TextChunk after its FinishChunk"),
        (LeakyErrors, "HTTP 401 answer: the error (provider_http_401) repeats a secret"),
        (NeverCloses, "stream closed early: the connection was still open"),
        (BadFactoryReply, "text reply: yielded 'not a chunk', not a ProviderChunk"),
    ],
)
async def test_a_broken_provider_fails_naming_what(broken: type[Wrapped], message: str) -> None:
    # hang_after is reached only by the two that hang (buffering, never closing); the rest fail at once.
    with pytest.raises(AssertionError) as info:
        await check_provider(broken, render=sse, env=env_for, hang_after=10.0)
    assert message in str(info.value)
    assert str(info.value).startswith(f"check_provider({broken.__name__})")


def _no_stream_render(reply: ScriptedReply) -> ReplayResponse:
    return ReplayResponse.sse(b"".join(sse(reply).chunks))


async def test_a_render_that_does_not_stream_is_refused() -> None:
    with pytest.raises(AssertionError, match="one chunk per wire event"):
        await check_provider(openai, render=_no_stream_render, env=env_for)


async def test_usage_is_compared() -> None:
    def wrong_usage(reply: ScriptedReply) -> ReplayResponse:
        if reply.usage is not None:
            reply = attrs.evolve(reply, usage=attrs.evolve(reply.usage, output_tokens=99))
        return sse(reply)

    with pytest.raises(AssertionError, match=r"text reply: usage is .*output_tokens=99"):
        await check_provider(openai, render=wrong_usage, env=env_for)
    await check_provider(openai, render=wrong_usage, env=env_for, usage=False)


async def test_a_factory_that_raises_raw_is_named() -> None:
    def needs_a_key(env: Mapping[str, str]) -> OpenAIProvider:
        env["MY_API_KEY"]  # a KeyError where AgentrtError (a startup error with a code) belongs
        return openai(env)

    message = r"check_provider\(needs_a_key\) text reply: the factory raised a raw KeyError"
    with pytest.raises(AssertionError, match=message):
        await check_provider(needs_a_key, render=sse, env=env_for)


class Canned:
    """An in-process provider that says the same thing to every request (no HTTP: the generic checks)."""

    def __init__(self, *chunks: ProviderChunk) -> None:
        self.chunks = chunks

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        for chunk in self.chunks:
            await trio.lowlevel.checkpoint()
            yield chunk

    async def aclose(self) -> None:
        pass


GOOD = (TextChunk(text="hi"), ToolCallsChunk(calls=(ToolCall(id="c1", name="f", arguments="{}"),)),
        UsageChunk(usage=Usage(input_tokens=1, output_tokens=1)), FinishChunk(reason="stop"))


async def test_without_render_an_in_process_provider_gets_the_generic_checks() -> None:
    await check_provider(Canned(*GOOD))
    await check_provider(lambda: Canned(*GOOD))
    await check_provider(lambda env: Canned(*GOOD), env={"ANY": "1"})


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        (GOOD[:-1], "plain request: yielded 0 FinishChunks"),
        ((*GOOD, FinishChunk(reason="stop")), "plain request: yielded FinishChunk after its FinishChunk"),
        ((ToolCallsChunk(calls=(ToolCall(id="c", name="f", arguments="{}"),) * 2), FinishChunk(reason=None)),
         "plain request: tool call ids ['c', 'c'] must be distinct"),
        ((ToolCallsChunk(calls=(ToolCall(id="c", name="f", arguments="{oops"),)), FinishChunk(reason=None)),
         "plain request: tool call arguments '{oops' are not JSON"),
    ],
)
async def test_without_render_a_broken_provider_is_named(chunks: tuple[ProviderChunk, ...], message: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(f"check_provider(Canned) {message}")):
        await check_provider(Canned(*chunks))


async def test_without_render_a_stream_that_cannot_be_closed_is_named() -> None:
    class Stubborn(Canned):
        async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
            try:
                async for chunk in super().stream(request):
                    yield chunk
            finally:
                await trio.sleep_forever()  # a cleanup that never ends (the suite's bound can still cancel it)

    with pytest.raises(AssertionError, match=r"check_provider\(Stubborn\) plain request: the stream did not end"):
        await check_provider(Stubborn(*GOOD), hang_after=2.0)


async def test_without_render_a_provider_class_is_a_factory_of_nothing() -> None:
    class Greeter(Canned):
        def __init__(self) -> None:
            super().__init__(*GOOD)

    await check_provider(Greeter)


class OneShot(Wrapped):
    """Closes its HTTP client after the first stream, as if each provider served one request."""

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        async with aclosing(self.inner.stream(request)) as chunks:
            async for chunk in chunks:
                yield chunk
        await self.inner.aclose()
        self.inner = None  # type: ignore[assignment]


async def test_a_provider_that_serves_one_request_is_caught() -> None:
    message = r"check_provider\(OneShot\) text reply, asked again of the same provider: raised a raw"
    with pytest.raises(AssertionError, match=message):
        await check_provider(OneShot, render=sse, env=env_for)
