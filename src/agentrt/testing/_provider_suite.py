"""``check_provider``: the conformance suite a model provider passes, against scripted replies.

A provider speaks some model API over HTTP; the suite cannot know that API, so
the provider's author gives ``render``, which writes a :class:`ScriptedReply`
(text fragments, tool calls, usage) as the API's own response, and ``env``,
which points the provider's factory at a base URL.  The suite serves each
reply from a real server on loopback (:func:`agentrt.testing.serve_replay`)
and checks what the provider makes of it::

    from agentrt.testing import check_provider

    async def test_my_provider_conforms():
        await check_provider(my_factory, render=render_as_my_api, env=lambda url: {"MY_API_URL": url})

It is a plain async function: it raises :class:`AssertionError` naming the
provider's scenario and what failed.  It is deterministic: every wait is on an
event (a request arrived, the connection closed), and ``hang_after`` is only the
bound after which a hang is reported as one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from typing import Any, cast

import attrs
import trio

from .._exceptions import collapse_single_group
from ..errors import AgentrtError
from ..events import Usage
from ..provider import (
    FinishChunk,
    Provider,
    ProviderChunk,
    ProviderRequest,
    ReasoningChunk,
    TextChunk,
    ToolCall,
    ToolCallsChunk,
    ToolSchema,
    UsageChunk,
)
from ._provider_stall import serve_stall
from ._replay import ReplayRequest, ReplayResponse, serve_replay

__all__ = ["check_provider", "ScriptedReply", "SCRIPTED_REPLIES"]

#: What error bodies carry that no error detail may repeat.
SECRET = "sk-checkprovider-0123456789abcdefSECRET"
MODEL = "check-provider-model"
PROMPT = "check_provider asks: say hello"
_CODE = re.compile(r"^[a-z][a-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_DETAIL = 2000
_CHUNK_TYPES = (TextChunk, ReasoningChunk, ToolCallsChunk, UsageChunk, FinishChunk)


@attrs.frozen(kw_only=True)
class ScriptedReply:
    """What the model says to one request; ``render`` writes it as the provider's API would.

    ``text`` is sent as separate fragments (one wire event each, so that the
    reply streams), then ``tool_calls``, then the end of the reply with
    ``finish`` as its reason and ``usage``.  With ``complete=False`` the end
    is left out: the body just stops, as when a server dies mid-reply.
    """

    model: str = MODEL
    text: tuple[str, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish: str = "stop"
    complete: bool = True


TEXT_REPLY = ScriptedReply(
    text=("Hel", "lo, ", "wörld ✓ 日本語", ' "quoted" \\ tab\tnew\nline'),
    usage=Usage(input_tokens=12, output_tokens=5),
)
TOOL_REPLY = ScriptedReply(
    text=("Let me look.",),
    tool_calls=(
        ToolCall(id="call_1", name="get_weather", arguments='{"city": "Zürich"}'),
        ToolCall(id="call_2", name="get_time", arguments='{"zone": "UTC", "n": [1, 2.5, null]}'),
    ),
    finish="tool_calls",
    usage=Usage(input_tokens=30, output_tokens=9),
)
#: The replies the suite asks ``render`` for (truncated copies of them too).
SCRIPTED_REPLIES: tuple[ScriptedReply, ...] = (TEXT_REPLY, TOOL_REPLY)

_TOOLS = (
    ToolSchema(name="get_weather", description="The weather in a city.",
               parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    ToolSchema(name="get_time", description="The time in a zone.",
               parameters={"type": "object", "properties": {"zone": {"type": "string"}}}),
)


def _request(tools: bool) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL,
        messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}),
        tools=_TOOLS if tools else (),
        idempotency_key="check-provider-key-1",
    )


def _error_body(status: int, _request: ReplayRequest) -> ReplayResponse:
    message = f"refused: key {SECRET} is not valid\x1b[2J\n(second line)"
    headers = (("retry-after", "0"),) if status in (429, 503) else ()
    return ReplayResponse.json({"error": {"message": message, "type": "invalid_request_error"}},
                               status=status, headers=headers)


def _without_length(response: ReplayResponse, chunks: tuple[bytes, ...]) -> ReplayResponse:
    headers = tuple((k, v) for k, v in response.headers if k.lower() != "content-length")
    return attrs.evolve(response, headers=headers, chunks=chunks)


@attrs.define
class _Case:
    """One scenario: its name and the provider's label (for messages), the chunks it yielded so far."""

    name: str
    label: str
    chunks: list[ProviderChunk] = attrs.Factory(list)

    def fail(self, what: str) -> AssertionError:
        return AssertionError(f"check_provider({self.label}) {self.name}: {what}")


async def check_provider(
    factory: Callable[[Mapping[str, str]], Provider] | Callable[[], Provider] | Provider,
    *,
    render: Callable[[ScriptedReply], ReplayResponse] | None = None,
    env: Callable[[str], Mapping[str, str]] | Mapping[str, str] | None = None,
    tools: bool = True,
    usage: bool = True,
    hang_after: float = 30.0,
) -> None:
    """Run the provider conformance suite; raises ``AssertionError`` naming the scenario and what failed.

    ``factory(env(url))`` makes a fresh provider that talks to the API at
    ``url`` (``http://127.0.0.1:<port>``, no trailing slash), as the factory
    registered with ``agentrt_register_providers`` is called.
    ``render(reply)`` returns the :class:`~agentrt.testing.ReplayResponse`
    the API sends for ``reply``: one element of ``chunks`` per wire event, so
    that the suite can hold the rest back after the first.  ``tools=False``
    and ``usage=False`` skip what the API cannot carry.  ``hang_after`` bounds
    each scenario; it is reached only by a provider that hangs.

    It checks that: the request carries the model and the prompt (and the
    tools offered); a reply comes back as its text fragments joined, its tool
    calls (names, JSON-equal arguments, unique ids), its usage and exactly one
    :class:`~agentrt.provider.FinishChunk` with nothing but usage after it, from
    one request, and again when the same provider is asked a second time;
    HTTP 401, 429 and 500 answers, a dropped connection, an empty or
    malformed body, a body broken off and a reply cut short all raise
    :class:`~agentrt.AgentrtError` with a snake_case code, nothing else, and
    never a finish, with a one-line detail of at most 2000 characters that does
    not repeat the secret in the error body; text arrives while the rest of the
    reply is held back (streaming); closing the stream early, cancelling it
    mid-reply and cancelling it before the reply starts all return promptly
    and close the connection; ``aclose()`` is bounded and may be called twice.

    Without ``render`` (a provider that speaks no HTTP, whose replies the
    suite cannot script), ``factory`` may also be a provider or a factory of
    no arguments, ``env`` is the mapping a factory gets, and the suite checks
    only what holds for any reply: the chunk types, one ``FinishChunk`` with
    only usage after it, well-formed tool calls, a second request on the same
    provider, closing and cancelling a stream after its first chunk, and
    ``aclose()``.
    """
    label = getattr(factory, "__name__", type(factory).__name__)
    if render is None:
        from ._provider_generic import check_any_provider  # it builds on this module's helpers

        await check_any_provider(factory, env if isinstance(env, Mapping) else {}, label, hang_after)
        return
    if not callable(env):
        raise TypeError("check_provider: with render, env(url) must be a callable giving the factory's env")
    if not isinstance(factory, type) and callable(getattr(factory, "stream", None)):
        raise TypeError("check_provider: with render, pass the factory (it is pointed at the scripted server)")
    return await _check_scripted(cast(Callable[[Mapping[str, str]], Provider], factory), render, env, label,
                                 tools=tools, usage=usage, hang_after=hang_after)


async def _check_scripted(factory: Callable[[Mapping[str, str]], Provider],
                          render: Callable[[ScriptedReply], ReplayResponse], env: Callable[[str], Mapping[str, str]],
                          label: str, *, tools: bool, usage: bool, hang_after: float) -> None:
    replies = [TEXT_REPLY, TOOL_REPLY] if tools else [TEXT_REPLY]
    for reply in replies:
        await _check_reply(factory, render, env, label, reply, tools=tools, usage=usage, hang_after=hang_after)
    failures: list[tuple[str, Callable[[ReplayRequest], ReplayResponse]]] = [
        (f"HTTP {status} answer", functools.partial(_error_body, status)) for status in (401, 429, 500)
    ]
    text = render(TEXT_REPLY)
    cut = render(attrs.evolve(TEXT_REPLY, complete=False))
    failures += [
        ("dropped connection", lambda _req: ReplayResponse.dropped()),
        ("empty body", lambda _req: _without_length(text, ())),
        ("malformed body", lambda _req: _without_length(text, (b"\x00\xff<html>not the API {{{\n\n",))),
        ("body broken off", lambda _req: attrs.evolve(text, disconnect_after=max(1, len(text.body) // 2))),
        ("reply cut short (complete=False)", lambda _req: cut),
    ]
    for name, script in failures:
        await _check_failure(factory, env, _Case(name, label), script, hang_after)
    await _check_streaming_and_close(factory, env, label, text, hang_after)


@asynccontextmanager
async def _provider(factory: Callable[[Mapping[str, str]], Provider], url: str, case: _Case,
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


async def close_twice(provider: Provider, case: _Case, hang_after: float) -> None:
    """``aclose()`` twice, shielded as the agent calls it and bounded; a hang or a raw exception fails ``case``."""
    for attempt in ("first", "second"):
        with trio.CancelScope(shield=True), trio.move_on_after(hang_after) as scope:
            try:
                await provider.aclose()
            except Exception as exc:
                raise case.fail(f"the {attempt} aclose() raised a raw {type(exc).__name__}") from exc
        if scope.cancelled_caught:
            raise case.fail(f"the {attempt} aclose() did not return within {hang_after:g} s")


async def _collect(provider: Provider, request: ProviderRequest, case: _Case, hang_after: float) -> None:
    """Stream ``request`` into ``case.chunks``; a hang or a raw exception fails the case."""
    stream = provider.stream(request)
    if not callable(getattr(stream, "aclose", None)):
        raise case.fail("stream() must return an async generator (or an iterator with aclose())")
    with trio.move_on_after(hang_after) as scope:
        async with aclosing(stream) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                if not isinstance(chunk, _CHUNK_TYPES):
                    raise case.fail(f"yielded {chunk!r}, not a ProviderChunk")
                finished = any(isinstance(c, FinishChunk) for c in case.chunks)
                if finished and not isinstance(chunk, UsageChunk):
                    raise case.fail(f"yielded {type(chunk).__name__} after its FinishChunk")
                case.chunks.append(chunk)
    if scope.cancelled_caught:
        raise case.fail(f"the stream did not end within {hang_after:g} s")


async def _check_reply(factory: Callable[[Mapping[str, str]], Provider], render: Callable[[ScriptedReply],
                       ReplayResponse], env: Callable[[str], Mapping[str, str]], label: str, reply: ScriptedReply,
                       *, tools: bool, usage: bool, hang_after: float) -> None:
    """The reply, asked for twice of one provider (the agent keeps one for every round of a turn)."""
    name = "tool-call reply" if reply.tool_calls else "text reply"
    case = _Case(name, label)
    response = render(reply)
    async with serve_replay(lambda _req: response) as server, _provider(factory, server.url, case, env,
                                                                        hang_after) as provider:
        for attempt in (1, 2):
            case = _Case(name if attempt == 1 else f"{name}, asked again of the same provider", label)
            try:
                await _collect(provider, _request(tools), case, hang_after)
            except AgentrtError as exc:
                raise case.fail(f"raised {exc.code}: {exc.detail}") from None
            except AssertionError:
                raise
            except Exception as exc:
                raise case.fail(f"raised a raw {type(exc).__name__}: {exc}") from exc
            if len(server.requests) != attempt:
                raise case.fail(f"sent {len(server.requests) - attempt + 1} requests for one stream (want 1)")
            body = server.requests[-1].body.decode("utf-8", "replace")
            needles = (("model", MODEL), ("prompt", PROMPT)) + ((("tool", "get_weather"),) if tools else ())
            for what, needle in needles:
                if needle not in body:
                    raise case.fail(f"the request body does not carry the {what} ({needle!r})")
            _check_chunks(case, reply, usage=usage)


def _check_chunks(case: _Case, reply: ScriptedReply, *, usage: bool) -> None:
    chunks = case.chunks
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    if text != "".join(reply.text):
        raise case.fail(f"the text fragments join to {text!r}, not {''.join(reply.text)!r}")
    finishes = [c for c in chunks if isinstance(c, FinishChunk)]
    if len(finishes) != 1:
        raise case.fail(f"yielded {len(finishes)} FinishChunks (want exactly 1, after the reply)")
    if not (finishes[0].reason is None or isinstance(finishes[0].reason, str)):
        raise case.fail(f"FinishChunk.reason is {finishes[0].reason!r}, not a str or None")
    calls = [call for c in chunks if isinstance(c, ToolCallsChunk) for call in c.calls]
    got = [(call.name, _json(call.arguments, case)) for call in calls]
    want = [(call.name, _json(call.arguments, case)) for call in reply.tool_calls]
    if got != want:
        raise case.fail(f"tool calls (name, arguments) are {got!r}, not {want!r}")
    ids = [call.id for call in calls]
    if any(not isinstance(i, str) or not i for i in ids) or len(set(ids)) != len(ids):
        raise case.fail(f"tool call ids {ids!r} must be distinct non-empty strings")
    if usage and reply.usage is not None:
        usages = [c.usage for c in chunks if isinstance(c, UsageChunk)]
        last = usages[-1] if usages else None
        if last is None or (last.input_tokens, last.output_tokens) != (
            reply.usage.input_tokens, reply.usage.output_tokens):
            raise case.fail(f"usage is {last!r}, not {reply.usage!r}")


def _json(text: str, case: _Case) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        raise case.fail(f"tool call arguments {text[:80]!r} are not JSON") from None


async def _check_failure(factory: Callable[[Mapping[str, str]], Provider], env: Callable[[str], Mapping[str, str]],
                         case: _Case, script: Callable[[ReplayRequest], ReplayResponse], hang_after: float) -> None:
    async with serve_replay(script) as server, _provider(factory, server.url, case, env, hang_after) as provider:
        try:
            await _collect(provider, _request(False), case, hang_after)
        except AgentrtError as exc:
            _check_error(case, exc)
        except AssertionError:
            raise
        except Exception as exc:
            raise case.fail(f"raised a raw {type(exc).__name__} ({exc}): raise AgentrtError(code, detail)") from exc
        else:
            raise case.fail(f"ended normally ({len(case.chunks)} chunks) instead of raising AgentrtError")
    if any(isinstance(c, FinishChunk) for c in case.chunks):
        raise case.fail("yielded a FinishChunk before failing")


def _check_error(case: _Case, exc: AgentrtError) -> None:
    if not isinstance(exc.code, str) or not _CODE.match(exc.code):
        raise case.fail(f"error code {exc.code!r} is not a stable snake_case code")
    detail = exc.detail if isinstance(exc.detail, str) else ""
    if SECRET in str(exc) or SECRET in detail:
        raise case.fail(f"the error ({exc.code}) repeats a secret from the response body")
    if len(detail) > _MAX_DETAIL:
        raise case.fail(f"the error detail ({exc.code}) is {len(detail)} characters long (at most {_MAX_DETAIL})")
    if _CONTROL.search(detail):
        raise case.fail(f"the error detail ({exc.code}) has raw control characters: {detail[:120]!r}")


async def _check_streaming_and_close(factory: Callable[[Mapping[str, str]], Provider],
                                     env: Callable[[str], Mapping[str, str]], label: str,
                                     text: ReplayResponse, hang_after: float) -> None:
    if len(text.chunks) < 2:
        raise AssertionError(
            f"check_provider({label}): render(reply) must give one chunk per wire event (got one chunk "
            "for a reply of several fragments), so that the suite can hold the rest back"
        )
    for how in ("closed early", "cancelled mid-reply", "cancelled before the reply"):
        case = _Case(f"stream {how}", label)
        async with AsyncExitStack() as stack:
            server = await stack.enter_async_context(serve_stall(None if "before" in how else text, send=1))
            provider = await stack.enter_async_context(_provider(factory, server.url, case, env, hang_after))
            with trio.move_on_after(hang_after) as guard:
                await _stream_then_stop(provider, case, how, server.requested)
            if guard.cancelled_caught:
                raise case.fail(
                    "no text arrived while the rest of the reply was held back: yield each chunk as it arrives"
                    if "before" not in how else f"the stream did not stop within {hang_after:g} s of the cancel"
                )
            with trio.move_on_after(hang_after) as guard:
                await server.closed.wait()
            if guard.cancelled_caught:
                raise case.fail(f"the connection was still open {hang_after:g} s after the stream was {how}")


async def _stream_then_stop(provider: Provider, case: _Case, how: str, requested: trio.Event) -> None:
    """Read up to the first text (or, before any reply, until the request arrived), then stop as ``how`` says."""

    async def cancel_on_request(scope: trio.CancelScope) -> None:
        await requested.wait()
        scope.cancel()

    # A failure raised inside the nursery leaves it as itself, not wrapped in a group.
    with trio.CancelScope() as scope, collapse_single_group():
        async with trio.open_nursery() as nursery:
            if "before" in how:
                nursery.start_soon(cancel_on_request, scope)
            await _read_first_text(provider, case, how, scope)
            nursery.cancel_scope.cancel()
    if how != "closed early" and not scope.cancelled_caught:
        raise case.fail("the stream swallowed the cancellation")


async def _read_first_text(provider: Provider, case: _Case, how: str, scope: trio.CancelScope) -> None:
    try:
        async with aclosing(provider.stream(_request(False))) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                if isinstance(chunk, FinishChunk):
                    raise case.fail("finished although the server held the rest of the reply back")
                if isinstance(chunk, TextChunk) and chunk.text:
                    if how == "closed early":
                        return  # leaving the block closes the stream
                    scope.cancel()
                    await trio.sleep_forever()  # the cancel arrives here
    except AgentrtError as exc:
        raise case.fail(f"raised {exc.code} instead of stopping quietly: {exc.detail}") from None
    except AssertionError:
        raise
    except Exception as exc:
        raise case.fail(f"raised a raw {type(exc).__name__} instead of stopping quietly") from exc
