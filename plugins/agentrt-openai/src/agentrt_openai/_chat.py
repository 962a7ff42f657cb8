"""What the chat-completions payloads mean: deltas to provider chunks, tool calls merged and checked.

Pure (no I/O): the HTTP layer hands over each SSE ``data`` string, or the
whole JSON body of a non-streamed answer, and gets provider chunks back.
The merge and validation rules are the reference agent's (contract §B), so a
server that repeats ids and names in every chunk, or leaves out ``index``,
gives the same tool calls here as there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from agentrt.errors import AgentrtError
from agentrt.events import Usage
from agentrt.provider import (
    FinishChunk,
    ProviderChunk,
    ReasoningChunk,
    TextChunk,
    ToolCall,
    ToolCallsChunk,
    UsageChunk,
)

__all__ = ["ChatStream", "parse_completion", "MAX_TEXT_BYTES", "MAX_TOOL_ARGUMENTS_BYTES"]

MAX_TEXT_BYTES = 8 * 1024 * 1024
MAX_TOOL_ARGUMENTS_BYTES = 64 * 1024

_TOOL_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,127}")
_SAFE_CODE = re.compile(r"[a-z0-9_:-]{1,160}", re.IGNORECASE)


def _public_code(error: Any) -> str:
    """The server's error code or type when it is a plain token, else nothing (never its message)."""
    if isinstance(error, Mapping):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if isinstance(value, str) and _SAFE_CODE.fullmatch(value):
                return value
    return ""


def _returned_error(error: Any) -> AgentrtError:
    code = _public_code(error)
    return AgentrtError(
        "provider_returned_error",
        f"the provider reported an error ({code})" if code else "the provider reported an error",
    )


def _text_of(content: Any) -> str:
    """``content`` as a string: itself, or the ``text`` of each part of an array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"] for part in content if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _usage_of(data: Mapping[str, Any]) -> Usage:
    def count(*keys: str) -> int | None:
        for key in keys:
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return None

    cached = None
    details = data.get("prompt_tokens_details")
    if isinstance(details, Mapping):
        value = details.get("cached_tokens")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            cached = value
    return Usage(
        input_tokens=count("prompt_tokens", "input_tokens"),
        output_tokens=count("completion_tokens", "output_tokens"),
        cache_read_input_tokens=cached,
    )


class _ToolCalls:
    """Tool-call fragments merged by key (``index``, else position), in first-seen order."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        # key -> [id, name, [argument pieces], argument bytes so far]
        self._calls: dict[Any, list[Any]] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def merge(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            return
        for position, frag in enumerate(fragments):
            if isinstance(frag, Mapping):
                self.merge_one(frag, position)

    def merge_one(self, frag: Mapping[str, Any], position: int) -> None:
        index = frag.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else position
        slot = self._calls.get(key)
        if slot is None:
            slot = self._calls[key] = ["", "", [], 0]
        call_id = frag.get("id")
        if isinstance(call_id, str) and call_id:
            slot[0] = call_id  # the last non-empty id wins
        function = frag.get("function")
        if not isinstance(function, Mapping):
            return
        name = function.get("name")
        if isinstance(name, str) and name:
            previous: str = slot[1]
            # Servers either stream the name in pieces or repeat it whole in every chunk.
            if not previous or name.startswith(previous):
                slot[1] = name
            elif not previous.endswith(name):
                slot[1] = previous + name
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):
            # A few servers send an object instead of JSON text.
            arguments = orjson.dumps(arguments).decode()
        if isinstance(arguments, str) and arguments:
            slot[3] += len(arguments) if arguments.isascii() else len(arguments.encode())
            if slot[3] > MAX_TOOL_ARGUMENTS_BYTES:
                raise AgentrtError(
                    "provider_tool_arguments_oversize",
                    f"tool call arguments exceed {MAX_TOOL_ARGUMENTS_BYTES} bytes",
                )
            slot[2].append(arguments)

    def finish(self) -> tuple[ToolCall, ...]:
        calls: list[ToolCall] = []
        seen: set[str] = set()
        for key, (call_id, name, pieces, _size) in self._calls.items():
            call_id = call_id or f"call-{key}"
            if not _TOOL_ID.fullmatch(call_id):
                raise AgentrtError("provider_tool_call_id_invalid", "a tool call id has an invalid shape")
            if not _TOOL_NAME.fullmatch(name):
                raise AgentrtError("provider_tool_name_invalid", f"tool call {call_id!r} has an invalid name")
            arguments = "".join(pieces) or "{}"
            try:
                orjson.loads(arguments)
            except orjson.JSONDecodeError:
                raise AgentrtError(
                    "provider_tool_arguments_invalid_json",
                    f"the arguments of tool call {call_id!r} are not valid JSON",
                ) from None
            if call_id in seen:
                raise AgentrtError("provider_tool_call_id_duplicate", f"tool call id {call_id!r} is repeated")
            seen.add(call_id)
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        return tuple(calls)


class ChatStream:
    """The state of one streamed chat completion.

    :meth:`feed` takes one SSE ``data`` string and returns the chunks to pass
    on now (text and reasoning, as they come); :meth:`finish` checks the
    stream ended properly and returns the closing chunks: tool calls (once),
    usage (the last one seen, if any) and the finish reason.  :attr:`done` is
    set by ``[DONE]``; the caller stops reading then.
    """

    __slots__ = ("_finished", "_text_bytes", "_tools", "_usage", "done", "finish_reason")

    def __init__(self) -> None:
        self.done = False
        self.finish_reason: str | None = None
        self._finished = False  # a finish_reason was seen (it may legitimately be any string)
        self._usage: Usage | None = None
        self._tools = _ToolCalls()
        self._text_bytes = 0

    def _count_text(self, text: str) -> None:
        self._text_bytes += len(text) if text.isascii() else len(text.encode())
        if self._text_bytes > MAX_TEXT_BYTES:
            raise AgentrtError("provider_text_oversize", f"the reply text exceeds {MAX_TEXT_BYTES} bytes")

    def feed(self, data: str) -> list[ProviderChunk]:
        """Interpret one event's data; return the chunks it produced."""
        if self.done:
            return []
        if data == "[DONE]":
            self.done = True
            return []
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise AgentrtError("provider_stream_malformed", "a streamed event is not valid JSON") from None
        if not isinstance(obj, dict):
            raise AgentrtError("provider_stream_malformed", "a streamed event is not a JSON object")
        error = obj.get("error")
        if error:
            raise _returned_error(error)
        usage = obj.get("usage")
        if isinstance(usage, Mapping):
            self._usage = _usage_of(usage)  # the last one wins
        choices = obj.get("choices")
        if not choices or not isinstance(choices, list):
            return []
        choice = choices[0]
        if not isinstance(choice, Mapping):
            return []
        out: list[ProviderChunk] = []
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            content = delta.get("content")
            if content:
                text = _text_of(content)
                if text:
                    self._count_text(text)
                    out.append(TextChunk(text=text))
            for key in ("reasoning_content", "reasoning"):
                reasoning = delta.get(key)
                if isinstance(reasoning, str) and reasoning:
                    out.append(ReasoningChunk(text=reasoning))
                    break
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                self._tools.merge(tool_calls)
            function_call = delta.get("function_call")
            if isinstance(function_call, Mapping):
                # The legacy single-function shape: one call, position 0.
                self._tools.merge_one({"function": function_call}, 0)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._finished = True
            self.finish_reason = reason if isinstance(reason, str) else str(reason)
        return out

    def finish(self) -> list[ProviderChunk]:
        """At ``[DONE]`` or end of body: the closing chunks, or ``provider_stream_truncated``."""
        if not self.done and not self._finished:
            raise AgentrtError("provider_stream_truncated", "the stream ended with neither a finish reason nor [DONE]")
        out: list[ProviderChunk] = []
        if self._tools:
            out.append(ToolCallsChunk(calls=self._tools.finish()))
        if self._usage is not None:
            out.append(UsageChunk(usage=self._usage))
        out.append(FinishChunk(reason=self.finish_reason))
        return out


def parse_completion(body: bytes) -> list[ProviderChunk]:
    """A whole non-streamed completion (``choices[0].message``) as provider chunks."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise AgentrtError("provider_response_invalid_json", "the response body is not valid JSON") from None
    if not isinstance(obj, dict):
        raise AgentrtError("provider_response_invalid_json", "the response body is not a JSON object")
    error = obj.get("error")
    if error:
        raise _returned_error(error)
    out: list[ProviderChunk] = []
    reason: str | None = None
    tools = _ToolCalls()
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        choice = choices[0]
        message = choice.get("message")
        if isinstance(message, Mapping):
            for key in ("reasoning_content", "reasoning"):
                reasoning = message.get(key)
                if isinstance(reasoning, str) and reasoning:
                    out.append(ReasoningChunk(text=reasoning))
                    break
            text = _text_of(message.get("content"))
            if text:
                if len(text.encode()) > MAX_TEXT_BYTES:
                    raise AgentrtError("provider_text_oversize", f"the reply text exceeds {MAX_TEXT_BYTES} bytes")
                out.append(TextChunk(text=text))
            tools.merge(message.get("tool_calls"))
            function_call = message.get("function_call")
            if isinstance(function_call, Mapping):
                tools.merge_one({"function": function_call}, 0)
        raw_reason = choice.get("finish_reason")
        if raw_reason is not None:
            reason = raw_reason if isinstance(raw_reason, str) else str(raw_reason)
    if tools:
        out.append(ToolCallsChunk(calls=tools.finish()))
    usage = obj.get("usage")
    if isinstance(usage, Mapping):
        out.append(UsageChunk(usage=_usage_of(usage)))
    out.append(FinishChunk(reason=reason))
    return out
