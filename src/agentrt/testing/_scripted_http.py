"""A scripted HTTP/1.1 server on loopback, for testing HTTP clients against exact bytes.

:func:`serve_replay` starts a real TCP server on ``127.0.0.1`` (a free port),
records every request it receives, and answers each one from a script::

    from agentrt.testing import ReplayResponse, serve_replay

    tool_round = ReplayResponse.sse([b'data: {"choices":[{"delta":{"tool_calls":[...]}}]}\\n\\n', ...])
    text_round = ReplayResponse.sse(b'data: {"choices":[{"delta":{"content":"hi"}}]}\\n\\ndata: [DONE]\\n\\n')
    async with serve_replay([tool_round, text_round]) as server:
        env["AGENTRT_API_BASE_URL"] = server.url + "/v1"
        ...                                   # run the agent: round 1 gets the tool call, round 2 the text
        await server.wait_for_requests(2)
        assert server.requests[1].json["messages"][-1]["role"] == "tool"

The script is either a sequence of :class:`ReplayResponse` served in order
(one per request; a request beyond the end gets a 404 and is counted in
:attr:`ReplayServer.unexpected`), or a callable that receives each
:class:`ReplayRequest` and returns (or, if async, awaits) the response: use
that to answer by path or by what the request contains.

A response is sent exactly as scripted: the status line, the headers in the
given order and spelling, and the body bytes.  The body goes out with
``transfer-encoding: chunked`` (one HTTP chunk per element of ``chunks``,
with ``chunk_delay`` seconds between them) unless a ``content-length``
header is given; ``delay`` holds back the first byte; ``disconnect_after``
drops the connection after that many body bytes (the client sees a broken
body); ``drop=True`` closes the connection without answering at all.  Every
connection carries one request and is closed after its response.
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Union

import attrs
import orjson
import trio

__all__ = ["ReplayRequest", "ReplayResponse", "ReplayServer", "serve_replay", "Script"]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_REQUEST_READ_TIMEOUT = 10.0
_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    301: "Moved Permanently",
    302: "Found",
    307: "Temporary Redirect",
    308: "Permanent Redirect",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@attrs.frozen(kw_only=True)
class ReplayRequest:
    """One request as the server received it (header names lower-cased, values as sent)."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return None

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)


def _as_headers(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(name), str(value)) for name, value in headers)


def _as_chunks(body: bytes | Sequence[bytes]) -> tuple[bytes, ...]:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return (bytes(body),)
    return tuple(bytes(c) for c in body)


@attrs.frozen(kw_only=True)
class ReplayResponse:
    """One scripted response; see the module docstring for what each field does."""

    status: int = 200
    reason: str | None = None
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_as_headers)
    chunks: tuple[bytes, ...] = attrs.field(default=(), converter=_as_chunks)
    delay: float = 0.0
    chunk_delay: float = 0.0
    disconnect_after: int | None = None
    drop: bool = False

    @property
    def body(self) -> bytes:
        """All body bytes."""
        return b"".join(self.chunks)

    @classmethod
    def sse(cls, body: bytes | Sequence[bytes], *, status: int = 200, **kwargs: Any) -> ReplayResponse:
        """A ``text/event-stream`` response; pass a list to control how the bytes are cut."""
        headers = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
        return cls(status=status, headers=headers + tuple(kwargs.pop("headers", ())), chunks=body, **kwargs)

    @classmethod
    def json(cls, obj: Any, *, status: int = 200, **kwargs: Any) -> ReplayResponse:
        """A JSON response with a ``content-length``."""
        body = orjson.dumps(obj)
        headers = (("content-type", "application/json"), ("content-length", str(len(body))))
        return cls(status=status, headers=headers + tuple(kwargs.pop("headers", ())), chunks=body, **kwargs)

    @classmethod
    def from_capture(cls, raw: bytes, **kwargs: Any) -> ReplayResponse:
        """A response from a capture holding the status line, the headers, a blank line and the body.

        Captures store the body as the application saw it (already de-chunked),
        so a ``transfer-encoding: chunked`` header is honoured by chunking it
        again on the way out; ``content-length`` is recomputed if present.
        """
        head, sep, body = raw.partition(b"\r\n\r\n")
        if not sep:
            head, sep, body = raw.partition(b"\n\n")
        if not sep:
            raise ValueError("a capture needs a blank line after its headers")
        lines = head.decode("latin-1").splitlines()
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/"):
            raise ValueError("a capture must start with an HTTP status line")
        code, _, reason = rest.partition(" ")
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise ValueError(f"bad header line in capture: {line!r}")
            if name.strip().lower() == "content-length":
                value = str(len(body))
            headers.append((name.strip(), value.strip()))
        return cls(status=int(code), reason=reason or None, headers=tuple(headers), chunks=body, **kwargs)

    @classmethod
    def dropped(cls, *, delay: float = 0.0) -> ReplayResponse:
        """Close the connection without sending anything (after reading the request)."""
        return cls(drop=True, delay=delay)

    def split(self, size: int) -> ReplayResponse:
        """The same response with its body cut into ``size``-byte chunks."""
        body = self.body
        pieces = tuple(body[i : i + size] for i in range(0, len(body), size))
        return attrs.evolve(self, chunks=pieces or (b"",))


Script = Union[
    Sequence[ReplayResponse],
    Callable[[ReplayRequest], Union[ReplayResponse, Awaitable[ReplayResponse]]],
]
"""A list of responses served in order, or a callable answering each request."""


class _BadRequest(Exception):
    pass


class ReplayServer:
    """A running replay server: :attr:`url`, the :attr:`requests` received, waiting helpers."""

    def __init__(self, script: Script, *, tls: bool = False) -> None:
        self._script = script
        self._tls = tls
        self._next = 0
        #: Every request received, in arrival order.
        self.requests: list[ReplayRequest] = []
        #: Requests that found the scripted list already used up (they got a 404).
        self.unexpected = 0
        #: Connections whose request could not be read (bad framing, timeout).
        self.bad_requests = 0
        self.port = 0
        self._changed = trio.Condition()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https`` when serving TLS; no trailing slash)."""
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    async def wait_for_requests(self, count: int, limit: float = 10.0) -> list[ReplayRequest]:
        """Wait until ``count`` requests arrived (``trio.TooSlowError`` after ``limit`` seconds)."""
        with trio.fail_after(limit):
            async with self._changed:
                while len(self.requests) < count:
                    await self._changed.wait()
        return self.requests[:count]

    async def _respond_to(self, request: ReplayRequest) -> ReplayResponse:
        script = self._script
        if callable(script):
            result = script(request)
            if inspect.isawaitable(result):
                result = await result
            assert isinstance(result, ReplayResponse)
            return result
        if self._next >= len(script):
            self.unexpected += 1
            return ReplayResponse(status=404, headers=(("content-length", "0"),))
        response = script[self._next]
        self._next += 1
        return response

    async def _handle(self, stream: trio.abc.Stream) -> None:
        async with stream:
            try:
                with trio.fail_after(_REQUEST_READ_TIMEOUT):
                    request = await _read_request(stream)
            except (_BadRequest, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
                self.bad_requests += 1
                return
            async with self._changed:
                self.requests.append(request)
                self._changed.notify_all()
            response = await self._respond_to(request)
            try:
                await _write_response(stream, response)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the client went away first; that is its business


async def _read_request(stream: trio.abc.Stream) -> ReplayRequest:
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        if len(buf) > _MAX_HEAD:
            raise _BadRequest("head too large")
        data = await stream.receive_some(65536)
        if not data:
            raise _BadRequest("closed before the end of the head")
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise _BadRequest("bad request line")
    method, path, _version = parts
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise _BadRequest("bad header line")
        headers.append((name.strip().lower(), value.strip()))
    names = dict(headers)
    if names.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(stream, bytearray(rest))
    else:
        length = int(names.get("content-length", "0") or "0")
        if length > _MAX_BODY:
            raise _BadRequest("body too large")
        body_buf = bytearray(rest)
        while len(body_buf) < length:
            data = await stream.receive_some(65536)
            if not data:
                raise _BadRequest("closed before the end of the body")
            body_buf += data
        body = bytes(body_buf[:length])
    return ReplayRequest(method=method, path=path, headers=tuple(headers), body=body)


async def _read_chunked(stream: trio.abc.Stream, buf: bytearray) -> bytes:
    body = bytearray()

    async def fill(n: int) -> None:
        while len(buf) < n:
            data = await stream.receive_some(65536)
            if not data:
                raise _BadRequest("closed inside a chunked body")
            buf.extend(data)

    while True:
        while b"\r\n" not in buf:
            await fill(len(buf) + 1)
        line, _, remainder = bytes(buf).partition(b"\r\n")
        buf[:] = remainder
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return bytes(body)
        await fill(size + 2)
        body += buf[:size]
        del buf[: size + 2]
        if len(body) > _MAX_BODY:
            raise _BadRequest("body too large")


def _chunk_frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _write_response(stream: trio.abc.Stream, response: ReplayResponse) -> None:
    if response.delay:
        await trio.sleep(response.delay)
    if response.drop:
        return
    names = {name.lower(): value for name, value in response.headers}
    framed_by_length = "content-length" in names
    chunked = not framed_by_length
    reason = response.reason if response.reason is not None else _REASONS.get(response.status, "Status")
    head = [f"HTTP/1.1 {response.status} {reason}\r\n".encode("latin-1")]
    for name, value in response.headers:
        head.append(f"{name}: {value}\r\n".encode("latin-1"))
    if chunked and "transfer-encoding" not in names:
        head.append(b"transfer-encoding: chunked\r\n")
    if "connection" not in names:
        head.append(b"connection: close\r\n")
    head.append(b"\r\n")
    await stream.send_all(b"".join(head))
    budget = response.disconnect_after
    for index, chunk in enumerate(response.chunks):
        if index and response.chunk_delay:
            await trio.sleep(response.chunk_delay)
        if budget is not None and len(chunk) >= budget:
            piece = chunk[:budget]
            if piece:
                await stream.send_all(_chunk_frame(piece) if chunked else piece)
            return  # drop the connection mid-body
        if budget is not None:
            budget -= len(chunk)
        if chunk:
            await stream.send_all(_chunk_frame(chunk) if chunked else chunk)
    if chunked:
        await stream.send_all(b"0\r\n\r\n")


@asynccontextmanager
async def serve_replay(
    script: Script | Iterable[ReplayResponse], *, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[ReplayServer]:
    """Run a :class:`ReplayServer` on ``127.0.0.1`` for the duration of the block.

    ``script`` is a list of responses served in order, or a callable
    ``request -> response`` (sync or async).  With ``ssl_context`` (a server
    context, e.g. from ``trustme``) it speaks HTTPS.  Leaving the block stops
    the server and closes every connection.
    """
    if not callable(script) and not isinstance(script, Sequence):
        script = list(script)
    server = ReplayServer(script, tls=ssl_context is not None)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        if ssl_context is None:
            listeners: list[trio.SocketListener] = await nursery.start(
                partial(trio.serve_tcp, server._handle, 0, host="127.0.0.1")
            )
            server.port = listeners[0].socket.getsockname()[1]
        else:
            tls_listeners: list[trio.SSLListener[trio.SocketStream]] = await nursery.start(
                partial(trio.serve_ssl_over_tcp, server._handle, 0, ssl_context, host="127.0.0.1")
            )
            transport = tls_listeners[0].transport_listener
            assert isinstance(transport, trio.SocketListener)
            server.port = transport.socket.getsockname()[1]
        try:
            yield server
        except BaseException as exc:
            # Re-raised below, outside the nursery, so that the block's own error reaches
            # the caller as itself rather than wrapped in an exception group.
            failure = exc
        finally:
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
