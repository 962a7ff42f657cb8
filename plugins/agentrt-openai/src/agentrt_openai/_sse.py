"""An incremental Server-Sent Events decoder (WHATWG "event stream interpretation").

Feed it bytes as they arrive, get complete events back.  It is written for
this project rather than taken from httpx-sse or openai-python because both of
those dispatch an *empty* event when a keep-alive comment follows an ``id:``
line (their issues #35 and #2722); here an event is dispatched only when it
carried at least one ``data`` line, as the specification says.

Speed matters (it sits under every streamed token), so the work is done on
whole blocks: line ends are normalised to ``\\n`` with two ``bytes.replace``
calls, the buffer is cut after the last blank line, the complete part is
decoded once and split into events, and the common event shape (a single
``data:`` line) takes a short path without a per-line loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

__all__ = ["SSEEvent", "SSEDecoder"]

_BOM = b"\xef\xbb\xbf"
_new = tuple.__new__


class SSEEvent(NamedTuple):
    """One dispatched event: ``data`` lines joined with ``\\n``, plus its fields."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental SSE decoder: :meth:`feed` bytes, get the events they completed.

    Any way of cutting the same bytes into chunks gives the same events.  An
    event still open at end of stream (no blank line after it) is discarded,
    as the specification requires; :attr:`pending` tells whether that happened.
    """

    __slots__ = ("_buf", "_pending_cr", "_started", "last_event_id", "retry")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._started = False
        self._pending_cr = False
        #: The last ``id`` field seen (it persists across events, per the spec).
        self.last_event_id: str | None = None
        #: The last valid ``retry`` field seen, in milliseconds.
        self.retry: int | None = None

    @property
    def pending(self) -> int:
        """How many bytes of an unfinished event are buffered."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add ``chunk`` to the stream; return the events it completed, in order."""
        if not chunk:
            return []
        if not self._buf and self._started and chunk[-2:] == b"\n\n" and not self._pending_cr and b"\r" not in chunk:
            # The usual case for a paced stream: exactly whole events, nothing buffered;
            # and most often exactly one single-line "data:" event.
            if chunk.startswith(b"data: ") and chunk.find(b"\n", 6) == len(chunk) - 2:
                data = chunk[6:-2].decode("utf-8", "replace")
                return [_new(SSEEvent, (data, None, self.last_event_id, self.retry))]
            return self._events(chunk[:-2].decode("utf-8", "replace"))
        if self._pending_cr:
            # A CR ended the previous chunk; a LF right after it belongs to the same line end.
            self._pending_cr = False
            if chunk[0] == 10:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            self._pending_cr = chunk[-1] == 13
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        if not self._started:
            buf += chunk
            if len(buf) < 3 and _BOM.startswith(bytes(buf)):
                return []  # might still become a BOM
            self._started = True
            if buf.startswith(_BOM):
                del buf[:3]
            search_from = 0
        else:
            search_from = len(buf) - 1 if buf else 0
            buf += chunk
        cut = buf.rfind(b"\n\n", search_from)
        if cut < 0:
            return []
        block = buf[:cut].decode("utf-8", "replace")
        del buf[: cut + 2]
        return self._events(block)

    def finish(self) -> list[SSEEvent]:
        """End of stream: the specification discards an unterminated event, so this returns ``[]``.

        It exists so callers treat every decoder alike; check :attr:`pending`
        to learn whether bytes were left over.
        """
        self._pending_cr = False
        return []

    def _events(self, block: str) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        append = out.append
        for text in block.split("\n\n"):
            # Fast path: one "data: ..." line and nothing else (what every LLM server sends).
            if text.startswith("data: ") and "\n" not in text:
                # tuple.__new__ directly: NamedTuple's generated __new__ costs a Python call per event.
                append(_new(SSEEvent, (text[6:], None, self.last_event_id, self.retry)))
                continue
            self._slow(text, append)
        return out

    def _slow(self, text: str, append: Callable[[SSEEvent], None]) -> None:
        data: list[str] = []
        event: str | None = None
        for line in text.split("\n"):
            if not line:
                # A blank line inside the block (three or more line ends in a row).
                if data:
                    append(SSEEvent("\n".join(data), event, self.last_event_id, self.retry))
                data = []
                event = None
                continue
            if line[0] == ":":
                continue  # a comment (keep-alive): never a dispatch by itself
            name, colon, value = line.partition(":")
            if colon and value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = int(value)
            # Any other field name is ignored, as the specification says.
        if data:
            append(SSEEvent("\n".join(data), event, self.last_event_id, self.retry))
