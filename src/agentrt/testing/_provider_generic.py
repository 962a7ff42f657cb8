"""``check_provider`` without ``render``: the checks that need no scripted reply.

For a provider that speaks no HTTP (an in-process model, a local library), the
suite cannot script what it says, so it checks what holds for any reply: the
chunk types and their order, one ``FinishChunk``, well-formed tool calls, a
second request on the same provider, closing and cancelling a stream after its
first chunk, and a bounded, repeatable ``aclose``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from typing import Any, cast

import trio

from ..errors import AgentrtError
from ..provider import FinishChunk, Provider, ToolCallsChunk, UsageChunk
from ._provider_common import Case, closable, close_twice, collect, json_of, request

__all__ = ["check_any_provider"]


def make_provider(factory: Any, env: Mapping[str, str], case: Case) -> Provider:
    """A provider from ``factory``: a provider itself, a factory of the agent's env, or of nothing."""
    if not isinstance(factory, type) and callable(getattr(factory, "stream", None)):
        return cast(Provider, factory)
    try:
        takes_env = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        takes_env = True
    try:
        provider = factory(dict(env)) if takes_env else factory()
    except AgentrtError as exc:
        raise case.fail(f"the factory refused the env: {exc.code}: {exc.detail}") from None
    except Exception as exc:
        raise case.fail(f"the factory raised a raw {type(exc).__name__}") from exc
    if provider is None or not callable(getattr(provider, "stream", None)):
        raise case.fail(f"the factory returned {provider!r}, not a provider with stream()")
    return cast(Provider, provider)


async def check_any_provider(factory: Any, env: Mapping[str, str], label: str, hang_after: float) -> None:
    """The checks of :func:`check_provider` that hold for whatever the provider replies."""
    case = Case("plain request", label)
    provider = make_provider(factory, env, case)
    async with _closed_after(provider, Case("aclose", label), hang_after):
        for name, tools in (("plain request", False), ("request offering tools", True), ("second request", False)):
            case = Case(name, label)
            await _ask(provider, case, tools, hang_after)
    for how in ("closed early", "cancelled after its first chunk"):
        case = Case(f"stream {how}", label)
        provider = make_provider(factory, env, case)
        async with _closed_after(provider, case, hang_after):
            await _stop_after_first(provider, case, how, hang_after)


@asynccontextmanager
async def _closed_after(provider: Provider, case: Case, hang_after: float) -> AsyncIterator[None]:
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):  # the failure already found is the one to report
            await close_twice(provider, case, hang_after)
        raise
    await close_twice(provider, case, hang_after)


async def _ask(provider: Provider, case: Case, tools: bool, hang_after: float) -> None:
    try:
        await collect(provider, request(tools), case, hang_after)
    except AgentrtError as exc:
        raise case.fail(f"raised {exc.code}: {exc.detail}") from None
    except AssertionError:
        raise
    except Exception as exc:
        raise case.fail(f"raised a raw {type(exc).__name__}: {exc}") from exc
    finishes = [c for c in case.chunks if isinstance(c, FinishChunk)]
    if len(finishes) != 1:
        raise case.fail(f"yielded {len(finishes)} FinishChunks (want exactly 1, after the reply)")
    if not all(isinstance(c, UsageChunk) for c in case.chunks[case.chunks.index(finishes[0]) + 1:]):
        raise case.fail("yielded more than usage after its FinishChunk")
    calls = [call for c in case.chunks if isinstance(c, ToolCallsChunk) for call in c.calls]
    ids = [call.id for call in calls]
    if any(not isinstance(i, str) or not i for i in ids) or len(set(ids)) != len(ids):
        raise case.fail(f"tool call ids {ids!r} must be distinct non-empty strings")
    for call in calls:
        if not isinstance(call.name, str) or not call.name:
            raise case.fail(f"a tool call has the name {call.name!r}")
        json_of(call.arguments, case)


async def _stop_after_first(provider: Provider, case: Case, how: str, hang_after: float) -> None:
    with trio.move_on_after(hang_after) as guard, trio.CancelScope() as scope:
        try:
            async with aclosing(closable(provider.stream(request(False)))) as chunks:
                async for _chunk in chunks:
                    if how == "closed early":
                        break
                    scope.cancel()
                    await trio.sleep_forever()
        except AgentrtError as exc:
            raise case.fail(f"raised {exc.code} instead of stopping quietly: {exc.detail}") from None
        except Exception as exc:
            raise case.fail(f"raised a raw {type(exc).__name__} instead of stopping quietly") from exc
    if guard.cancelled_caught:
        raise case.fail(f"the stream did not stop within {hang_after:g} s")
