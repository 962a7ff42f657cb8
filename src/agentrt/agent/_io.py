"""The agent's stdin and stdout, trio-friendly and bounded.

Input lines may be up to :data:`MAX_INPUT_LINE_BYTES` (32 MiB, the contract's
limit for a turn carrying attachments), eight times the host-side framing cap,
and an oversized line is a per-turn error rather than a fatal one: the lines
are split by the host's :class:`~agentrt.lowlevel.JsonlReader` with that cap
and ``on_oversize="skip"``, which keeps at most the cap plus one chunk in
memory and, past the cap, discards the rest of the line.

Pipes are driven with :class:`trio.lowlevel.FdStream` on duplicated fds.  A
terminal is not: making a tty non-blocking would leak into the user's shell,
so terminals are read and written from a worker thread instead.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from typing import Union

import trio

from .._framing import JsonlReader, OversizeLine

__all__ = [
    "MAX_INPUT_LINE_BYTES",
    "Oversized",
    "InputLine",
    "read_lines",
    "ByteSource",
    "ByteSink",
    "open_stdio",
]

MAX_INPUT_LINE_BYTES = 32 * 1024 * 1024
_CHUNK = 256 * 1024


Oversized = OversizeLine
"""A line longer than the cap (its content was discarded); ``size`` is its length."""

InputLine = Union[bytes, Oversized]


class ByteSource:
    """A readable fd: ``receive_some()`` returns ``b""`` at end of file."""

    def __init__(self, fd: int) -> None:
        self._fd = os.dup(fd)
        self._tty = not _is_pollable(self._fd)
        self._stream = None if self._tty else trio.lowlevel.FdStream(self._fd)

    async def receive_some(self) -> bytes:
        """The next chunk, or ``b""`` at EOF."""
        if self._stream is not None:
            return await self._stream.receive_some(_CHUNK)
        # A terminal: a thread that may be abandoned on cancellation (the
        # process is exiting then; the blocked read dies with it).
        return await trio.to_thread.run_sync(os.read, self._fd, _CHUNK, abandon_on_cancel=True)

    async def aclose(self) -> None:
        """Release the duplicated fd."""
        if self._stream is not None:
            await self._stream.aclose()
        elif self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ByteSink:
    """A writable fd; one ``send_all`` per batch of output lines."""

    def __init__(self, fd: int) -> None:
        self._fd = os.dup(fd)
        self._tty = not _is_pollable(self._fd)
        self._stream = None if self._tty else trio.lowlevel.FdStream(self._fd)
        self._lock = trio.Lock()

    async def send_all(self, data: bytes) -> None:
        """Write all of ``data`` (``trio.BrokenResourceError`` when the reader left)."""
        async with self._lock:
            if self._stream is not None:
                await self._stream.send_all(data)
                return
            await trio.to_thread.run_sync(_write_all, self._fd, data)

    async def aclose(self) -> None:
        """Release the duplicated fd."""
        if self._stream is not None:
            await self._stream.aclose()
        elif self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError as exc:
        raise trio.BrokenResourceError("the output was closed") from exc


def _is_pollable(fd: int) -> bool:
    # FIFOs and sockets can be made non-blocking safely; a tty or a regular
    # file cannot usefully be (files are always "ready"; ttys are shared).
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def open_stdio() -> tuple[ByteSource, ByteSink]:
    """The process's stdin and stdout as a trio source and sink."""
    return ByteSource(0), ByteSink(1)


async def read_lines(source: ByteSource, limit: int = MAX_INPUT_LINE_BYTES) -> AsyncIterator[InputLine]:
    """Yield each ``\\n``-terminated line (without the newline, as raw bytes), or :class:`Oversized`.

    The final unterminated line is yielded at EOF.  Memory stays bounded by
    ``limit`` plus one chunk whatever the peer sends.
    """
    # The framing splits; the agent parses each line itself (its errors are per turn).
    reader = JsonlReader(_raw_line, max_line_bytes=limit, on_oversize="skip")
    while True:
        chunk = await source.receive_some()
        if not chunk:
            break
        for line in reader.feed(chunk):
            yield line
    for line in reader.finish():
        yield line


def _raw_line(line: bytes) -> bytes:
    return line
