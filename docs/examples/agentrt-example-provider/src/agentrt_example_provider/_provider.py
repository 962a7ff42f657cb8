"""The example-ollama provider: a model API that streams its reply as JSON lines (Ollama's ``/api/chat``).

Request: ``POST <base>/api/chat`` with ``{"model", "messages", "stream": true, "tools"}``.
Reply: one JSON object per line; ``message.content`` holds text, ``message.tool_calls``
the tool calls, and the last line has ``"done": true`` with ``done_reason`` and the token
counts.  Change :func:`_request_body` and :meth:`_Reply.feed` for another API of this kind.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import trio

from agentrt import AgentrtError
from agentrt.errors import ProviderError
from agentrt.events import Usage
from agentrt.net import is_loopback_host
from agentrt.provider import (
    FinishChunk,
    ProviderChunk,
    ProviderRequest,
    ReasoningChunk,
    TextChunk,
    ToolCall,
    ToolCallsChunk,
    UsageChunk,
)

__all__ = ["OllamaChatProvider", "base_url_from_env"]

DEFAULT_URL = "http://127.0.0.1:11434"
MAX_LINE_BYTES = 1024 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024


def base_url_from_env(env: Mapping[str, str]) -> str:
    """``EXAMPLE_OLLAMA_URL`` (default :data:`DEFAULT_URL`): http only on loopback, https elsewhere."""
    url = (env.get("EXAMPLE_OLLAMA_URL") or DEFAULT_URL).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AgentrtError("invalid_api_base_url", "EXAMPLE_OLLAMA_URL must be an http(s) URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise AgentrtError(
            "api_base_url_must_not_contain_credentials_query_or_fragment",
            "EXAMPLE_OLLAMA_URL must not carry credentials, a query or a fragment",
        )
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise AgentrtError("remote_api_requires_https", "EXAMPLE_OLLAMA_URL must use https for a non-loopback host")
    return url


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-style message as the API takes it (tool call arguments as objects, not JSON text)."""
    out = dict(message)
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {"function": {"name": c["function"]["name"], "arguments": orjson.loads(c["function"]["arguments"] or "{}")}}
            for c in calls
            if isinstance(c, Mapping)
        ]
    return out


def _request_body(request: ProviderRequest) -> bytes:
    try:
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": [_message(m) for m in request.messages],
            "stream": True,
        }
        if request.tools:
            payload["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
                for t in request.tools
            ]
        return orjson.dumps(payload)
    except (TypeError, KeyError, ValueError) as exc:  # orjson's errors are ValueErrors
        why = type(exc).__name__
        raise ProviderError("provider_request_invalid", f"the request cannot be encoded: {why}") from None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class _Reply:
    """The chunks of one reply, one JSON line at a time."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.done = False

    def feed(self, line: bytes) -> list[ProviderChunk]:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ProviderError("provider_stream_malformed", "a line of the reply is not JSON") from None
        if not isinstance(obj, dict):
            raise ProviderError("provider_stream_malformed", "a line of the reply is not a JSON object")
        if "error" in obj:
            # What the server says is not repeated: it may quote a key back.
            raise ProviderError("provider_returned_error", "the provider reported an error in its reply")
        out: list[ProviderChunk] = []
        message = obj.get("message")
        if isinstance(message, dict):
            if isinstance(message.get("thinking"), str) and message["thinking"]:
                out.append(ReasoningChunk(text=message["thinking"]))
            if isinstance(message.get("content"), str) and message["content"]:
                out.append(TextChunk(text=message["content"]))
            for call in message.get("tool_calls") or ():
                self.calls.append(self._tool_call(call))
        if obj.get("done") is True:
            self.done = True
            if self.calls:
                out.append(ToolCallsChunk(calls=tuple(self.calls)))
            prompt, completion = _count(obj.get("prompt_eval_count")), _count(obj.get("eval_count"))
            if prompt is not None or completion is not None:
                out.append(UsageChunk(usage=Usage(input_tokens=prompt, output_tokens=completion)))
            reason = obj.get("done_reason")
            out.append(FinishChunk(reason=reason if isinstance(reason, str) else None))
        return out

    def _tool_call(self, call: Any) -> ToolCall:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ProviderError("provider_tool_name_invalid", "a tool call has no name")
        arguments = function.get("arguments", {}) if isinstance(function, dict) else {}
        text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        given = call.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{len(self.calls) + 1}"
        return ToolCall(id=call_id, name=name, arguments=text)


class OllamaChatProvider:
    """A :class:`agentrt.provider.Provider` for the API at ``base_url``; its HTTP client is closed by :meth:`aclose`."""

    def __init__(self, base_url: str, *, read_timeout: float = 300.0) -> None:
        self.base_url = base_url
        self._timeout = httpx.Timeout(read_timeout, connect=10.0)
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            # No proxies or netrc from the environment: the configured URL is the only destination.
            self._http = httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=self._timeout)
        return self._http

    async def aclose(self) -> None:
        """Close the connection pool (bounded, safe to call twice)."""
        if self._http is not None:
            client, self._http = self._http, None
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await client.aclose()

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        """Send ``request`` and yield its chunks as they arrive; failures are ``ProviderError`` with a code."""
        where = _origin(self.base_url)
        http_request = self._client().build_request(
            "POST", self.base_url + "/api/chat", content=_request_body(request),
            headers={"content-type": "application/json", "accept": "application/x-ndjson"},
        )
        try:
            response = await self._client().send(http_request, stream=True)
        except httpx.TimeoutException:
            raise ProviderError("provider_timeout", f"{where} did not answer in time") from None
        except httpx.HTTPError as exc:
            why = type(exc).__name__
            raise ProviderError("provider_connection_failed", f"could not reach {where} ({why})") from None
        try:
            status = response.status_code
            if status >= 300:
                # The status only: an error body may quote the request or a key back.
                raise ProviderError(f"provider_http_{status}", f"{where} answered HTTP {status}")
            reply = _Reply()
            async with aclosing(self._lines(response, where)) as lines:
                async for line in lines:
                    for chunk in reply.feed(line):
                        yield chunk
                    if reply.done:
                        return
            raise ProviderError("provider_stream_truncated", "the reply ended before its last line")
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await response.aclose()  # at once, also when the consumer stops early or is cancelled

    async def _lines(self, response: httpx.Response, where: str) -> AsyncGenerator[bytes, None]:
        """The body's non-blank lines, bounded in size."""
        buffer = b""
        total = 0
        try:
            async for data in response.aiter_bytes():
                total += len(data)
                if total > MAX_BODY_BYTES:
                    raise ProviderError("provider_response_oversize", f"the reply exceeds {MAX_BODY_BYTES} bytes")
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                if len(buffer) > MAX_LINE_BYTES:
                    raise ProviderError("provider_response_oversize", f"a reply line exceeds {MAX_LINE_BYTES} bytes")
                for line in lines:
                    if line.strip():
                        yield line
        except httpx.TimeoutException:
            raise ProviderError("provider_timeout", f"{where} stopped sending its reply") from None
        except httpx.HTTPError as exc:
            raise ProviderError("provider_stream_interrupted", f"the reply broke off ({type(exc).__name__})") from None
        if buffer.strip():
            yield buffer
