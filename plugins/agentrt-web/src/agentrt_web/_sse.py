"""The server-sent-event response: one hub subscriber streamed to one browser.

Not starlette's ``StreamingResponse``: that one stops its body task from a
disconnect listener, and hypercorn delivers ``http.disconnect`` while it is
still inside the response's last ``send`` recycling the connection.  The
cancellation then lands in hypercorn's own bookkeeping: the connection is
neither closed nor watched for idleness any more, so at shutdown hypercorn
waits its whole graceful timeout for it (the browser reuses it to reconnect).
Here the last ``send`` is shielded, and the disconnect listener only stops
the stream while frames are flowing.

A stream's body messages go straight to the server's ``send`` when the
security middleware left it in the scope (:data:`BODY_SEND`): the layers in
between act on the response start only, and with many pages each frame is a
send per page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import trio

__all__ = ["SSEResponse", "BODY_SEND"]

Message = MutableMapping[str, Any]
#: The scope key of the server's own ``send`` (set by the outermost middleware, after its checks).
BODY_SEND = "agentrt.body_send"


class SSEResponse:
    """An ASGI response streaming ``body`` as ``text/event-stream`` until it ends or the client leaves."""

    def __init__(self, body: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> None:
        self.body = body
        self.headers = [(b"content-type", b"text/event-stream; charset=utf-8")] + [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()
        ]

    async def __call__(
        self, scope: Any, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        body_send = scope.get(BODY_SEND, send)
        async with trio.open_nursery() as nursery:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                streaming.cancel()

            with trio.CancelScope() as streaming:
                nursery.start_soon(watch_disconnect)
                await send({"type": "http.response.start", "status": 200, "headers": self.headers})
                try:
                    async for chunk in self.body:
                        await body_send({"type": "http.response.body", "body": chunk, "more_body": True})
                finally:
                    aclose = getattr(self.body, "aclose", None)
                    if aclose is not None:
                        with trio.CancelScope(shield=True):
                            await aclose()
            if not streaming.cancelled_caught:
                # The end of the body: the server recycles or closes the connection inside this call.
                with trio.CancelScope(shield=True):
                    await body_send({"type": "http.response.body", "body": b"", "more_body": False})
            nursery.cancel_scope.cancel()
