"""One turn of the reference agent: provider rounds, tool calls, the final text.

A turn is at most :data:`MAX_ROUNDS` provider requests and at most
:data:`MAX_TOOL_CALLS` tool calls in total.  Each round streams the reply
(every text fragment goes out as it arrives); a round that ends with tool
calls reports them, runs them one after the other, feeds each result back as
an OpenAI ``tool`` message and asks again.  A round without tool calls ends
the turn with its text.

The loop talks to the outside world through :class:`TurnOutput` (what the
agent prints) so that it knows nothing of dialects or file descriptors.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol, cast

import attrs
import trio

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
from ..tools import Tool, ToolContext

__all__ = [
    "MAX_ROUNDS",
    "MAX_TOOL_CALLS",
    "MAX_TEXT_BYTES",
    "TurnOutput",
    "TurnResult",
    "run_turn",
    "turn_identity",
    "public_code",
    "compact_json",
]

MAX_ROUNDS = 4
MAX_TOOL_CALLS = 4
MAX_TEXT_BYTES = 8 * 1024 * 1024
#: The bound on one tool call (the managed task waits up to 300 s by contract).
TOOL_TIMEOUT = 330.0
_PUBLIC_CODE = re.compile(r"[a-z0-9_:-]{1,160}", re.IGNORECASE)


def compact_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact separators, raw UTF-8, insertion key order."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def turn_identity(messages: Sequence[Mapping[str, Any]]) -> str:
    """sha256 hex of the request messages (keys ``role``, ``content``) as compact JSON.

    This is the original reference agent's ``turnIdentity``; the managed-task
    idempotency key is derived from it, so it must match byte for byte.
    """
    body = compact_json([{"role": m["role"], "content": m["content"]} for m in messages])
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _round_key(session_id: str, identity: str, round_number: int) -> str:
    # The same round of the same turn of the same session gets the same key, so
    # a provider that honours idempotency keys can recognise a repeat.
    digest = hashlib.sha256(f"{session_id}\0{identity}\0{round_number}".encode("utf-8", "surrogatepass"))
    return f"agentrt-agent:{digest.hexdigest()}"


_REASON_CHARS = 400


def public_code(exc: BaseException, default: str = "provider_request_failed") -> str:
    """The stable code shown for a failure (never free text, never a secret)."""
    if isinstance(exc, AgentrtError) and _PUBLIC_CODE.fullmatch(exc.code):
        return exc.code
    return default


def public_reason(exc: BaseException) -> str:
    """Why a failure with a :func:`public_code` happened, for the turn's message (``""`` for anything else).

    agentrt's own error details name endpoints as ``scheme://host:port``, statuses
    and causes, never values; what a server said is masked again here, so no
    secret shape (token, key, URL password) reaches the host.
    """
    if not isinstance(exc, AgentrtError) or not _PUBLIC_CODE.fullmatch(exc.code):
        return ""
    from .._exit_reason import mask_text

    return mask_text(exc.detail)[:_REASON_CHARS]


class TurnOutput(Protocol):
    """Where a turn's visible progress goes (the agent's stdout, through its dialect).

    Block framing (``content_block_start``/``_stop`` in awp-jsonl) is the
    dialect's business: it opens a block before the first fragment and
    closes it before the next other event.
    """

    async def text(self, text: str) -> None:
        """A fragment of reply text, as soon as the provider sent it."""

    async def tool_uses(self, calls: Sequence[tuple[ToolCall, Any]]) -> None:
        """The model asked for these tools (call and parsed input)."""


@attrs.frozen(kw_only=True)
class TurnResult:
    """A completed turn: its final text and its usage summed over rounds (None: none reported)."""

    text: str
    usage: Usage | None


def _sum_usage(total: Usage | None, new: Usage) -> Usage | None:
    # Like the original: once any usage was seen, both counts are reported
    # (missing ones count as zero); other counts are not summed.
    if new.input_tokens is None and new.output_tokens is None:
        return total
    base = total or Usage(input_tokens=0, output_tokens=0)
    return Usage(
        input_tokens=(base.input_tokens or 0) + (new.input_tokens or 0),
        output_tokens=(base.output_tokens or 0) + (new.output_tokens or 0),
    )


@attrs.define
class _Round:
    text: list[str] = attrs.field(factory=list)
    text_bytes: int = 0
    calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None


async def _stream_round(provider: Provider, request: ProviderRequest, out: TurnOutput, time_limit: float) -> _Round:
    rnd = _Round()
    try:
        with trio.fail_after(time_limit):
            # A provider's stream is an async generator (the Provider contract: closed when left early).
            stream = cast("AsyncGenerator[ProviderChunk, None]", provider.stream(request))
            async with aclosing(stream) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, TextChunk):
                        if not chunk.text:
                            continue
                        rnd.text_bytes += len(chunk.text.encode("utf-8", "surrogatepass"))
                        if rnd.text_bytes > MAX_TEXT_BYTES:
                            raise AgentrtError("provider_text_oversize", "the reply text exceeds 8 MiB")
                        rnd.text.append(chunk.text)
                        await out.text(chunk.text)
                    elif isinstance(chunk, ToolCallsChunk):
                        rnd.calls = rnd.calls + tuple(chunk.calls)
                    elif isinstance(chunk, UsageChunk):
                        rnd.usage = chunk.usage  # the last one wins, as in the original
                    elif isinstance(chunk, ReasoningChunk | FinishChunk):
                        pass  # reasoning is not part of the reply; finish needs no action
    except trio.TooSlowError as exc:
        raise AgentrtError("provider_timeout", "the provider did not finish within AGENTRT_TIMEOUT_MS") from exc
    return rnd


def _parse_arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments or "{}")
    except ValueError as exc:  # the provider validates; a third-party one might not
        raise AgentrtError("provider_tool_arguments_invalid_json", "tool arguments are not JSON") from exc


async def _call_tool(tool: Tool | None, arguments: Any, context: ToolContext) -> str:
    """The tool's result as the JSON text of the ``tool`` message; failures are ``{"error": code}``."""
    if tool is None:
        return compact_json({"error": "unknown_managed_tool"})
    try:
        with trio.fail_after(TOOL_TIMEOUT):
            result = await tool.call(arguments, context)
    except trio.TooSlowError:
        return compact_json({"error": "tool_timeout"})
    except AgentrtError as exc:
        return compact_json({"error": public_code(exc)})
    except Exception:  # a tool bug must not end the turn; the model sees a code
        return compact_json({"error": "tool_failed"})
    try:
        return compact_json(result)
    except (TypeError, ValueError):
        return compact_json({"error": "tool_result_not_json"})


async def run_turn(
    *,
    provider: Provider,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Mapping[str, Tool],
    session_id: str,
    out: TurnOutput,
    time_limit: float,
) -> TurnResult:
    """Run one turn over ``messages`` (system + history + user); raise ``AgentrtError`` on failure."""
    working: list[Mapping[str, Any]] = list(messages)
    identity = turn_identity(messages)
    schemas = tuple(ToolSchema(name=t.name, description=t.description, parameters=t.parameters) for t in tools.values())
    usage: Usage | None = None
    calls_made = 0
    for round_number in range(MAX_ROUNDS):
        request = ProviderRequest(
            model=model,
            messages=tuple(working),
            tools=schemas,
            idempotency_key=_round_key(session_id, identity, round_number),
        )
        rnd = await _stream_round(provider, request, out, time_limit)
        if rnd.usage is not None:
            usage = _sum_usage(usage, rnd.usage)
        text = "".join(rnd.text)
        if not rnd.calls:
            if not text:
                raise AgentrtError("provider_returned_empty_text", "the provider returned no text")
            return TurnResult(text=text, usage=usage)
        if not tools:
            raise AgentrtError("provider_requested_unavailable_tool", "the model called a tool none was offered")
        calls_made += len(rnd.calls)
        if calls_made > MAX_TOOL_CALLS:
            raise AgentrtError("managed_tool_call_limit", f"more than {MAX_TOOL_CALLS} tool calls in one turn")
        parsed = [(call, _parse_arguments(call)) for call in rnd.calls]
        await out.tool_uses(parsed)
        working.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments or "{}"},
                    }
                    for c in rnd.calls
                ],
            }
        )
        for call, arguments in parsed:
            context = ToolContext(session_id=session_id, turn_identity=identity, tool_call_id=call.id)
            content = await _call_tool(tools.get(call.name), arguments, context)
            working.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content})
    raise AgentrtError("managed_tool_round_limit", f"no final answer within {MAX_ROUNDS} provider rounds")
