"""The OpenAI-compatible streaming provider: HTTP, retries, caps; the meaning of payloads is in ``_chat``.

One :class:`OpenAIProvider` owns one ``httpx.AsyncClient`` (httpx runs under
trio through anyio).  Each :meth:`OpenAIProvider.stream` call is one provider
request with its own ``Idempotency-Key`` and one deadline covering everything
(connecting, retries and their waits, and reading the stream).

Retries use ``stamina`` (trio-aware; a backoff hook gives the wait, so the
server's ``Retry-After`` is honoured) and happen only while no response body
has been read: once streaming started, a failure is final
(``provider_stream_interrupted``), because the model's output cannot be
un-sent to the consumer.
"""

from __future__ import annotations

import os
import random
import re
import ssl
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
import orjson
import stamina
import trio

from agentrt.approval import mask_secrets
from agentrt.errors import AgentrtError
from agentrt.provider import ProviderChunk, ProviderRequest

from ._chat import ChatStream, _public_code, parse_completion
from ._retry import RETRYABLE_STATUSES, retry_after_seconds
from ._sse import SSEDecoder
from .config import OpenAIConfig

__all__ = ["OpenAIProvider", "MAX_BODY_BYTES"]

MAX_BODY_BYTES = 8 * 1024 * 1024
_ERROR_BODY_BYTES = 16 * 1024
_EXCERPT_CHARS = 160  # of an error body's message, in a failure's detail
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A key prefix with anything after it, or a long word mixing letters and digits (a token).
_KEYISH_RE = re.compile(
    r"\b(?:sk|pk|rk|ak|key|tok)[-_][A-Za-z0-9_.-]{2,}"
    r"|\b(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{24,}"
)
_DRAIN_BYTES = 64 * 1024  # what may follow [DONE] before we stop caring
_DRAIN_SECONDS = 1.0  # read this much of an error body, to find a safe error code in it


class _RetryableStatus(Exception):
    """A status worth another try (raised inside the retry loop only)."""

    def __init__(self, status: int, retry_after: float | None, detail: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after
        self.detail = detail


class _ConnectFailure(Exception):
    """No response at all: refused, reset, or closed before the status line."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def endpoint_origin(url: str) -> str:
    """``scheme://host:port`` of ``url``: what an error may name (never credentials, path or query)."""
    parsed = httpx.URL(url)
    host = parsed.host if ":" not in parsed.host else f"[{parsed.host}]"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{host}:{port}"


def _excerpt(text: str) -> str:
    """The first :data:`_EXCERPT_CHARS` characters of ``text`` on one line, control characters escaped."""
    flat = " ".join(text.split())
    cut = flat[:_EXCERPT_CHARS] + ("…" if len(flat) > _EXCERPT_CHARS else "")
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group(0)):02x}", cut)


def _connect_reason(exc: BaseException) -> str:
    """Why a connection failed: the exception's class and the operating system's words for it.

    The ``errno`` sits a few links down the cause chain, inside the group of
    attempts trio makes (``Connection refused``, ``Name or service not known``).
    """
    seen: BaseException | None = exc
    for _ in range(12):
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno is not None:
            words = os.strerror(seen.errno)
            return f"{type(exc).__name__}: {_excerpt(words).lower()}"
        group = getattr(seen, "exceptions", None)
        if isinstance(group, tuple) and group and isinstance(group[0], BaseException):
            seen = group[0]
        else:
            seen = seen.__cause__ or seen.__context__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {_excerpt(text)}" if text else type(exc).__name__


def _is_tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the ssl error sits a few links down the cause chain
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _jsonable(value: Any) -> Any:
    # Messages arrive as Mappings/Sequences of any kind; orjson serialises dicts and lists.
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


class OpenAIProvider:
    """A :class:`agentrt.provider.Provider` for any OpenAI-compatible ``/chat/completions`` server.

    Use each stream with :func:`contextlib.aclosing` so that leaving early
    closes the HTTP response at once::

        async with aclosing(provider.stream(request)) as chunks:
            async for chunk in chunks:
                ...

    ``verify`` is passed to httpx (an :class:`ssl.SSLContext` for a private CA).
    """

    def __init__(self, config: OpenAIConfig, *, verify: ssl.SSLContext | bool = True) -> None:
        self.config = config
        self._verify = verify
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                follow_redirects=False,
                # No proxies, netrc or certificate paths from the environment: the
                # configured endpoint is the only place a request (and its token) goes.
                trust_env=False,
                timeout=httpx.Timeout(self.config.timeout_s),
                verify=self._verify,
            )
        return self._http

    async def __aenter__(self) -> OpenAIProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._http is not None:
            client, self._http = self._http, None
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await client.aclose()

    def _request_body(self, request: ProviderRequest) -> bytes:
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": list(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
        try:
            return orjson.dumps(payload, default=_jsonable)
        except orjson.JSONEncodeError as exc:
            raise AgentrtError("provider_request_invalid", f"the request cannot be encoded as JSON: {exc}") from None

    def _headers(self, idempotency_key: str) -> dict[str, str]:
        headers = {
            "accept": "text/event-stream, application/json",
            "content-type": "application/json",
            "user-agent": self.config.user_agent,
            "idempotency-key": idempotency_key,
        }
        if self.config.token:
            headers["authorization"] = f"Bearer {self.config.token}"
        return headers

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        """Send ``request`` and yield its chunks; see :class:`agentrt.provider.Provider`."""
        deadline = trio.current_time() + self.config.timeout_s
        key = request.idempotency_key or str(uuid.uuid4())
        http_request = self._client().build_request(
            "POST", self.config.endpoint, content=self._request_body(request), headers=self._headers(key)
        )
        try:
            with trio.fail_at(deadline):
                response = await self._open(http_request, deadline)
        except trio.TooSlowError:
            raise AgentrtError("provider_timeout", f"no response within {self.config.timeout_s:g} s") from None
        body = response.aiter_bytes()
        try:
            content_type = response.headers.get("content-type", "").lower()
            if "text/event-stream" in content_type:
                decoder = SSEDecoder()
                chat = ChatStream()
                total = 0
                while not chat.done:
                    chunk = await self._receive(body, deadline)
                    if chunk is None:
                        break
                    total += len(chunk)
                    if total > MAX_BODY_BYTES:
                        raise AgentrtError("provider_response_oversize", f"the response exceeds {MAX_BODY_BYTES} bytes")
                    for event in decoder.feed(chunk):
                        if event.event == "error":
                            raise AgentrtError("provider_returned_error", "the provider sent an error event")
                        for out in chat.feed(event.data):
                            yield out
                        if chat.done:
                            break
                if chat.done:
                    await self._drain(body, deadline)
                for out in chat.finish():
                    yield out
            else:
                # Not a stream: the whole body is one JSON completion.
                parts: list[bytes] = []
                total = 0
                while (chunk := await self._receive(body, deadline)) is not None:
                    total += len(chunk)
                    if total > MAX_BODY_BYTES:
                        raise AgentrtError("provider_response_oversize", f"the response exceeds {MAX_BODY_BYTES} bytes")
                    parts.append(chunk)
                for out in parse_completion(b"".join(parts)):
                    yield out
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                # Finalise httpx's body iterator here, not later from the garbage collector.
                close_body = getattr(body, "aclose", None)
                if close_body is not None:
                    await close_body()
                await response.aclose()

    async def _drain(self, body: AsyncIterator[bytes], deadline: float) -> None:
        """After ``[DONE]``: read what little is left so the body ends cleanly (bounded; errors ignored).

        Servers end the body right after ``[DONE]``; reading that end lets httpx finish
        its own iterators and keep the connection, instead of abandoning them mid-way.
        """
        left = _DRAIN_BYTES
        with trio.move_on_at(min(deadline, trio.current_time() + _DRAIN_SECONDS)):
            try:
                async for chunk in body:
                    left -= len(chunk)
                    if left < 0:
                        return
            except httpx.HTTPError:
                return

    async def _receive(self, body: AsyncIterator[bytes], deadline: float) -> bytes | None:
        """The next body chunk, ``None`` at the end; the request's deadline applies."""
        try:
            with trio.fail_at(deadline):
                return await body.__anext__()
        except StopAsyncIteration:
            return None
        except (trio.TooSlowError, httpx.TimeoutException):
            raise AgentrtError(
                "provider_timeout", f"the response did not finish within {self.config.timeout_s:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise AgentrtError("provider_stream_interrupted", f"the response broke off: {type(exc).__name__}") from None

    async def _open(self, http_request: httpx.Request, deadline: float) -> httpx.Response:
        """Send until a usable response arrives (status 2xx, body not yet read), with bounded retries."""
        config = self.config
        retries = 0

        def backoff(exc: Exception) -> bool | float:
            nonlocal retries
            if isinstance(exc, _RetryableStatus) and exc.retry_after is not None:
                wait = exc.retry_after
            elif isinstance(exc, (_RetryableStatus, _ConnectFailure)):
                wait = config.retry_backoff_s * (2**retries) * random.uniform(1.0, 1.5)
            else:
                return False
            wait = min(wait, config.retry_wait_max_s)
            if trio.current_time() + wait >= deadline:
                return False  # the wait alone would exhaust the request's time: fail now
            retries += 1
            return wait

        try:
            async for attempt in stamina.retry_context(
                on=backoff, attempts=config.max_retries + 1, timeout=None, wait_max=config.retry_wait_max_s
            ):
                with attempt:
                    return await self._send_once(http_request)
        except _RetryableStatus as exc:
            raise AgentrtError(f"provider_http_{exc.status}", exc.detail) from None
        except _ConnectFailure as exc:
            raise AgentrtError(
                "provider_connection_failed",
                f"could not reach the provider at {endpoint_origin(self.config.endpoint)} ({exc.kind})",
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_once(self, http_request: httpx.Request) -> httpx.Response:
        try:
            response = await self._client().send(http_request, stream=True)
        except httpx.TimeoutException:
            raise trio.TooSlowError from None
        except httpx.TransportError as exc:
            if _is_tls_failure(exc):
                # A certificate problem will not go away by asking again.
                raise AgentrtError(
                    "provider_tls_failed",
                    f"the TLS certificate of {endpoint_origin(self.config.endpoint)} could not be verified",
                ) from None
            raise _ConnectFailure(_connect_reason(exc)) from None
        status = response.status_code
        if 200 <= status < 300:
            return response
        try:
            if 300 <= status < 400:
                raise AgentrtError(
                    "provider_redirect_rejected",
                    f"the provider at {endpoint_origin(self.config.endpoint)} answered HTTP {status}"
                    " (redirects are not followed)",
                )
            detail = f"the provider at {endpoint_origin(self.config.endpoint)} answered HTTP {status}"
            code, excerpt = await self._error_code(response)
            if code:
                detail += f" ({code})"
            if excerpt:
                detail += f": {self._mask(excerpt)}"
            if status in RETRYABLE_STATUSES:
                raise _RetryableStatus(status, retry_after_seconds(response.headers), detail)
            raise AgentrtError(f"provider_http_{status}", detail)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await response.aclose()

    async def _error_code(self, response: httpx.Response) -> tuple[str, str]:
        """A safe error code and a short excerpt of the error body's message (unmasked: see :meth:`_mask`)."""
        head = b""
        try:
            with trio.move_on_after(1):
                async for chunk in response.aiter_bytes():
                    head += chunk
                    if len(head) >= _ERROR_BODY_BYTES:
                        break  # enough to say what the server said
        except httpx.HTTPError:
            pass
        try:
            obj = orjson.loads(head)
        except orjson.JSONDecodeError:
            return "", _excerpt(head.decode("utf-8", "replace"))
        if isinstance(obj, dict):
            error = obj.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            if not isinstance(message, str):
                message = obj.get("message") if isinstance(obj.get("message"), str) else obj.get("detail")
            return _public_code(error), _excerpt(message) if isinstance(message, str) else ""
        return "", ""

    def _mask(self, text: str) -> str:
        """``text`` without the token and without anything shaped like a secret.

        Stricter than :func:`agentrt.approval.mask_secrets` alone: a server
        quoting a key back (``your key sk-ab… is invalid``) may cut it short, and
        a long opaque word is taken for a credential.
        """
        if self.config.token and len(self.config.token) >= 4:
            text = text.replace(self.config.token, "****")
        return _KEYISH_RE.sub("****", mask_secrets(text))
