"""What the fake model APIs share: a loopback server per block, JSON requests, held event streams.

Stdlib only (``http.server``, one thread per connection), so a test needs nothing beyond agentrt.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeStream", "Handler", "open_stream", "send_json", "serve", "split"]

HOLD_BOUND = 120.0  # a hang guard only: a test releases a held reply as soon as it saw the first piece

#: ``on_post(handler, path, body)`` answers one POST (``path`` without its query).
OnPost = Callable[["Handler", str, dict[str, Any]], None]
#: ``on_get(handler, path)`` answers one GET.
OnGet = Callable[["Handler", str], None]


class Handler(BaseHTTPRequestHandler):
    """The request handler of every fake: silent, HTTP/1.1, JSON bodies; the answers are the fake's callbacks."""

    protocol_version = "HTTP/1.1"
    on_get: OnGet
    on_post: OnPost

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing on stderr: a test's output stays the test's."""

    def do_GET(self) -> None:
        self.on_get(self, self.path.split("?", 1)[0])

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        self.on_post(self, self.path.split("?", 1)[0], body if isinstance(body, dict) else {})


def send_json(handler: BaseHTTPRequestHandler, status: int, body: bytes, *, ctype: str = "application/json") -> None:
    """One complete response with a content length."""
    handler.send_response(status)
    handler.send_header("content-type", ctype)
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def open_stream(handler: BaseHTTPRequestHandler) -> None:
    """Start a ``text/event-stream`` response whose body ends when the connection closes."""
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("connection", "close")
    handler.end_headers()
    handler.close_connection = True


def split(text: str, n: int) -> list[str]:
    """``text`` in at most ``n`` pieces of equal size (one empty piece for empty text)."""
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeStream:
    """The state of a streaming fake (Gemini, OpenAI Responses): its script, what it saw, its hold gate.

    ``reply`` is streamed in ``pieces``; with ``tool_command`` set the first call of a conversation asks for
    the peer's shell tool with that command, and the call carrying the tool's output is answered
    ``The tool said: <output>`` (each output kept in ``tool_results``).  ``requests`` keeps each call's
    path and JSON body.  ``hold`` stops each streamed reply after its first piece until :meth:`release`;
    ``streamed`` is set once that first piece is written.  ``url`` is the server's base URL.
    """

    def __init__(self, reply: str, pieces: int, tool_command: str | None, hold: bool) -> None:
        self.reply = reply
        self.pieces = pieces
        self.tool_command = tool_command
        self.hold = hold
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.tool_results: list[Any] = []
        self.streamed = threading.Event()
        self._released = threading.Event()
        self.url = ""

    def release(self) -> None:
        """Let held replies finish."""
        self._released.set()

    def calls(self, suffix: str) -> list[dict[str, Any]]:
        """The bodies of the calls whose path ends with ``suffix``."""
        return [body for path, body in self.requests if path.split("?", 1)[0].endswith(suffix)]

    def stream(self, handler: BaseHTTPRequestHandler, reply: str, frame: Callable[[str, bool], bytes]) -> None:
        """Write ``reply`` in pieces, ``frame(piece, last)`` each, flushed; hold after the first if told."""
        pieces = split(reply, self.pieces)
        for n, piece in enumerate(pieces):
            handler.wfile.write(frame(piece, n == len(pieces) - 1))
            handler.wfile.flush()
            if n == 0:
                self.streamed.set()
                if self.hold:
                    self._released.wait(HOLD_BOUND)


@contextmanager
def serve(state: Any, on_post: OnPost, on_get: OnGet, *, on_exit: Callable[[], None] | None = None) -> Iterator[None]:
    """Serve on 127.0.0.1 (a free port) for the block, ``state.url`` set to its base URL.

    ``on_exit`` runs before the shutdown (a held reply must be released, or its thread would wait).
    """
    handler = type("FakeHandler", (Handler,), {"on_post": staticmethod(on_post), "on_get": staticmethod(on_get)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        if on_exit is not None:
            on_exit()
        server.shutdown()
        server.server_close()
        thread.join()
