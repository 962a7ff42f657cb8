"""A loopback server that sends the start of a reply and then holds the rest back.

``check_provider`` uses it to see that a provider streams (the first text
arrives while the rest is held back) and that closing or cancelling a stream
closes its connection: the server reads until the client hangs up and says
so through :attr:`StallServer.closed`, an event, so nothing waits on a clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import trio

from ._replay import _REASONS, ReplayResponse, _chunk_frame, _read_request

__all__ = ["StallServer", "serve_stall"]


class StallServer:
    """Answers one request with the head and the first ``send`` body chunks of ``response``, then waits."""

    def __init__(self, response: ReplayResponse | None, send: int) -> None:
        self._response = response
        self._send = send
        self.port = 0
        #: Set when a request has been read (its head and body).
        self.requested = trio.Event()
        #: Set when the client closed the connection (or reset it).
        self.closed = trio.Event()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, stream: trio.abc.Stream) -> None:
        async with stream:
            try:
                await _read_request(stream)
            except Exception:
                self.closed.set()
                return
            self.requested.set()
            try:
                if self._response is not None:
                    await stream.send_all(_head(self._response))
                    chunked = not _has_length(self._response)
                    for chunk in self._response.chunks[: self._send]:
                        await stream.send_all(_chunk_frame(chunk) if chunked else chunk)
                while await stream.receive_some(65536):
                    pass  # whatever the client sends; the end of it is what counts
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            self.closed.set()


def _has_length(response: ReplayResponse) -> bool:
    return any(name.lower() == "content-length" for name, _ in response.headers)


def _head(response: ReplayResponse) -> bytes:
    reason = response.reason if response.reason is not None else _REASONS.get(response.status, "Status")
    lines = [f"HTTP/1.1 {response.status} {reason}\r\n"]
    lines += [f"{name}: {value}\r\n" for name, value in response.headers]
    if not _has_length(response):
        lines.append("transfer-encoding: chunked\r\n")
    lines.append("connection: close\r\n\r\n")
    return "".join(lines).encode("latin-1")


@asynccontextmanager
async def serve_stall(response: ReplayResponse | None, send: int = 1) -> AsyncIterator[StallServer]:
    """Run a :class:`StallServer` on ``127.0.0.1`` for the block (``response=None``: no answer at all)."""
    server = StallServer(response, send)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(
            partial(trio.serve_tcp, server._handle, 0, host="127.0.0.1")
        )
        server.port = listeners[0].socket.getsockname()[1]
        try:
            yield server
        except BaseException as exc:
            failure = exc  # re-raised as itself below, not wrapped in the nursery's group
        finally:
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
