"""``check_provider``'s streaming and closing scenarios, and the server they need.

The server sends the start of a reply and then holds the rest back;
``check_provider`` uses it to see that a provider streams (the first text
arrives while the rest is held back) and that closing or cancelling a stream
closes its connection: the server reads until the client hangs up and says
so through :attr:`StallServer.closed`, an event, so nothing waits on a clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from functools import partial

import trio

from .._exception_groups import collapse_single_group
from ..errors import AgentrtError
from ..provider import FinishChunk, Provider, TextChunk
from ._provider_common import Case, closable, provider_for, request
from ._scripted_http import _REASONS, ReplayResponse, _chunk_frame, _read_request

__all__ = ["StallServer", "serve_stall", "check_streaming_and_close"]


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


async def check_streaming_and_close(factory: Callable[[Mapping[str, str]], Provider],
                                     env: Callable[[str], Mapping[str, str]], label: str,
                                     text: ReplayResponse, hang_after: float) -> None:
    if len(text.chunks) < 2:
        raise AssertionError(
            f"check_provider({label}): render(reply) must give one chunk per wire event (got one chunk "
            "for a reply of several fragments), so that the suite can hold the rest back"
        )
    for how in ("closed early", "cancelled mid-reply", "cancelled before the reply"):
        case = Case(f"stream {how}", label)
        async with AsyncExitStack() as stack:
            server = await stack.enter_async_context(serve_stall(None if "before" in how else text, send=1))
            provider = await stack.enter_async_context(provider_for(factory, server.url, case, env, hang_after))
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


async def _stream_then_stop(provider: Provider, case: Case, how: str, requested: trio.Event) -> None:
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


async def _read_first_text(provider: Provider, case: Case, how: str, scope: trio.CancelScope) -> None:
    try:
        async with aclosing(closable(provider.stream(request(False)))) as chunks:
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
