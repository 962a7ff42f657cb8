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

import functools
from collections.abc import Callable, Mapping
from typing import cast

import attrs

from ..errors import AgentrtError
from ..events import Usage
from ..provider import (
    FinishChunk,
    Provider,
    TextChunk,
    ToolCall,
    ToolCallsChunk,
    UsageChunk,
)
from ._provider_common import (
    MODEL,
    PROMPT,
    SECRET,
    Case,
    check_error,
    collect,
    json_of,
    provider_for,
    request,
)
from ._provider_stall import check_streaming_and_close
from ._scripted_http import ReplayRequest, ReplayResponse, serve_replay

__all__ = ["check_provider", "ScriptedReply", "SCRIPTED_REPLIES"]


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

def _error_body(status: int, _request: ReplayRequest) -> ReplayResponse:
    message = f"refused: key {SECRET} is not valid\x1b[2J\n(second line)"
    headers = (("retry-after", "0"),) if status in (429, 503) else ()
    return ReplayResponse.json({"error": {"message": message, "type": "invalid_request_error"}},
                               status=status, headers=headers)


def _without_length(response: ReplayResponse, chunks: tuple[bytes, ...]) -> ReplayResponse:
    headers = tuple((k, v) for k, v in response.headers if k.lower() != "content-length")
    return attrs.evolve(response, headers=headers, chunks=chunks)


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
        from ._provider_generic import check_any_provider  # it builds on the suite's request and checks

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
        await _check_failure(factory, env, Case(name, label), script, hang_after)
    await check_streaming_and_close(factory, env, label, text, hang_after)


async def _check_reply(factory: Callable[[Mapping[str, str]], Provider], render: Callable[[ScriptedReply],
                       ReplayResponse], env: Callable[[str], Mapping[str, str]], label: str, reply: ScriptedReply,
                       *, tools: bool, usage: bool, hang_after: float) -> None:
    """The reply, asked for twice of one provider (the agent keeps one for every round of a turn)."""
    name = "tool-call reply" if reply.tool_calls else "text reply"
    case = Case(name, label)
    response = render(reply)
    async with serve_replay(lambda _req: response) as server, provider_for(factory, server.url, case, env,
                                                                        hang_after) as provider:
        for attempt in (1, 2):
            case = Case(name if attempt == 1 else f"{name}, asked again of the same provider", label)
            try:
                await collect(provider, request(tools), case, hang_after)
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


def _check_chunks(case: Case, reply: ScriptedReply, *, usage: bool) -> None:
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
    got = [(call.name, json_of(call.arguments, case)) for call in calls]
    want = [(call.name, json_of(call.arguments, case)) for call in reply.tool_calls]
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


async def _check_failure(factory: Callable[[Mapping[str, str]], Provider], env: Callable[[str], Mapping[str, str]],
                         case: Case, script: Callable[[ReplayRequest], ReplayResponse], hang_after: float) -> None:
    async with serve_replay(script) as server, provider_for(factory, server.url, case, env, hang_after) as provider:
        try:
            await collect(provider, request(False), case, hang_after)
        except AgentrtError as exc:
            check_error(case, exc)
        except AssertionError:
            raise
        except Exception as exc:
            raise case.fail(f"raised a raw {type(exc).__name__} ({exc}): raise AgentrtError(code, detail)") from exc
        else:
            raise case.fail(f"ended normally ({len(case.chunks)} chunks) instead of raising AgentrtError")
    if any(isinstance(c, FinishChunk) for c in case.chunks):
        raise case.fail("yielded a FinishChunk before failing")


