"""What the provider suites share: the request they send, a scenario's bookkeeping, streaming one request.

Private to :mod:`agentrt.testing`; :func:`agentrt.testing.check_provider` is the public entry.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from typing import Any, cast

import attrs
import trio

from ..errors import AgentrtError
from ..provider import (
    FinishChunk,
    Provider,
    ProviderChunk,
    ProviderRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallsChunk,
    ToolSchema,
    UsageChunk,
)

#: What error bodies carry that no error detail may repeat.
SECRET = "sk-checkprovider-0123456789abcdefSECRET"
MODEL = "check-provider-model"
PROMPT = "check_provider asks: say hello"
_CODE = re.compile(r"^[a-z][a-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_DETAIL = 2000
_CHUNK_TYPES = (TextChunk, ReasoningChunk, ToolCallsChunk, UsageChunk, FinishChunk)

_TOOLS = (
    ToolSchema(name="get_weather", description="The weather in a city.",
               parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    ToolSchema(name="get_time", description="The time in a zone.",
               parameters={"type": "object", "properties": {"zone": {"type": "string"}}}),
)


def request(tools: bool) -> ProviderRequest:
    """The request every scenario sends: a model, a system and a user message, and two tools when ``tools``."""
    return ProviderRequest(
        model=MODEL,
        messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}),
        tools=_TOOLS if tools else (),
        idempotency_key="check-provider-key-1",
    )


@attrs.define
class Case:
    """One scenario: its name and the provider's label (for messages), the chunks it yielded so far."""

    name: str
    label: str
    chunks: list[ProviderChunk] = attrs.Factory(list)

    def fail(self, what: str) -> AssertionError:
        return AssertionError(f"check_provider({self.label}) {self.name}: {what}")


@asynccontextmanager
async def provider_for(factory: Callable[[Mapping[str, str]], Provider], url: str, case: Case,
                    env: Callable[[str], Mapping[str, str]], hang_after: float) -> AsyncIterator[Provider]:
    try:
        provider = factory(dict(env(url)))
    except AgentrtError as exc:
        raise case.fail(f"the factory refused the env for {url}: {exc.code}: {exc.detail}") from None
    except Exception as exc:
        raise case.fail(f"the factory raised a raw {type(exc).__name__} for the env of {url}") from exc
    if provider is None or not callable(getattr(provider, "stream", None)):
        raise case.fail(f"the factory returned {provider!r}, not a provider with stream()")
    try:
        yield provider
    except BaseException:
        with contextlib.suppress(Exception):  # the failure already found is the one to report
            await close_twice(provider, case, hang_after)
        raise
    await close_twice(provider, case, hang_after)


async def close_twice(provider: Provider, case: Case, hang_after: float) -> None:
    """``aclose()`` twice, shielded as the agent calls it and bounded; a hang or a raw exception fails ``case``."""
    for attempt in ("first", "second"):
        with trio.CancelScope(shield=True), trio.move_on_after(hang_after) as scope:
            try:
                await provider.aclose()
            except Exception as exc:
                raise case.fail(f"the {attempt} aclose() raised a raw {type(exc).__name__}") from exc
        if scope.cancelled_caught:
            raise case.fail(f"the {attempt} aclose() did not return within {hang_after:g} s")


def closable(stream: AsyncIterator[ProviderChunk]) -> AsyncGenerator[ProviderChunk, None]:
    """``stream`` as ``aclosing`` takes it: every provider's ``stream`` is an async generator.

    ``Provider.stream`` is declared ``AsyncIterator`` so implementations may say
    so; the narrow cast is the one the agent loop makes, and :func:`collect`
    fails a stream without ``aclose()`` before it gets here.
    """
    return cast("AsyncGenerator[ProviderChunk, None]", stream)


async def collect(provider: Provider, request: ProviderRequest, case: Case, hang_after: float) -> None:
    """Stream ``request`` into ``case.chunks``; a hang or a raw exception fails the case."""
    stream = provider.stream(request)
    if not callable(getattr(stream, "aclose", None)):
        raise case.fail("stream() must return an async generator (or an iterator with aclose())")
    with trio.move_on_after(hang_after) as scope:
        async with aclosing(closable(stream)) as chunks:
            async for chunk in chunks:
                if not isinstance(chunk, _CHUNK_TYPES):
                    raise case.fail(f"yielded {chunk!r}, not a ProviderChunk")
                finished = any(isinstance(c, FinishChunk) for c in case.chunks)
                if finished and not isinstance(chunk, UsageChunk):
                    raise case.fail(f"yielded {type(chunk).__name__} after its FinishChunk")
                case.chunks.append(chunk)
    if scope.cancelled_caught:
        raise case.fail(f"the stream did not end within {hang_after:g} s")


def json_of(text: str, case: Case) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        raise case.fail(f"tool call arguments {text[:80]!r} are not JSON") from None


def check_error(case: Case, exc: AgentrtError) -> None:
    if not isinstance(exc.code, str) or not _CODE.match(exc.code):
        raise case.fail(f"error code {exc.code!r} is not a stable snake_case code")
    detail = exc.detail if isinstance(exc.detail, str) else ""
    if SECRET in str(exc) or SECRET in detail:
        raise case.fail(f"the error ({exc.code}) repeats a secret from the response body")
    if len(detail) > _MAX_DETAIL:
        raise case.fail(f"the error detail ({exc.code}) is {len(detail)} characters long (at most {_MAX_DETAIL})")
    if _CONTROL.search(detail):
        raise case.fail(f"the error detail ({exc.code}) has raw control characters: {detail[:120]!r}")
