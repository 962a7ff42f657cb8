"""Writing bytes to a file descriptor from the trio thread, without a worker thread per write.

A sink that writes to stdout must not block the trio thread on a slow reader,
but a ``trio.to_thread`` round trip per batch costs more CPU than the write
itself (and keeps each batch alive across the hop).  On a pipe or a socket the
write is attempted with ``pwritev2(RWF_NOWAIT)``: it never blocks, and unlike
``O_NONBLOCK`` it leaves the open file description alone, which other holders
of the same stdout (the shell, a sibling process, Python's own ``sys.stdout``)
share.  When the pipe is full, trio's ``wait_writable`` parks the task until
the reader catches up.  A regular file is written directly (the page cache
does not block for long, and epoll cannot wait on a file anyway); anything
else (a terminal, a kernel without ``RWF_NOWAIT`` for that file) falls back to
one worker-thread write per call.

Given ``pipe_size``, the first write that fills a pipe grows it to that size
(never shrinks it): a pipe's default 64 KiB made ``agentrt run --json``
write its 187 MB in about five calls per batch, each waking the reader.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from typing import Literal

import trio

from ..errors import AgentrtError

__all__ = ["FdWriter", "OUTPUT_CLOSED"]

#: The code of the :class:`~agentrt.errors.AgentrtError` a write raises when the reader is gone.
OUTPUT_CLOSED = "output_closed"

WriteMode = Literal["nowait", "direct", "thread"]

# The reader went away, or the descriptor is gone: nothing more can be written.
_CLOSED_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET, errno.EBADF})
# pwritev2 flags this file does not support: use the worker-thread fallback.
_UNSUPPORTED_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.EINVAL, errno.ESPIPE, errno.ENOSYS})


def _initial_mode(fd: int) -> WriteMode:
    try:
        st = os.fstat(fd)
    except OSError:
        return "thread"  # the first write reports the real error
    if stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "direct"
    if os.isatty(fd) or not hasattr(os, "RWF_NOWAIT"):
        return "thread"
    return "nowait"


class FdWriter:
    """Writes bytes to one file descriptor, in order, from the trio thread.

    ``write`` returns once every byte is in the kernel; call it from one task at
    a time (a sink's ``handle`` already is).  It raises
    ``AgentrtError("output_closed")`` when the reader has gone away; other ``OSError`` s propagate.  The writer
    never closes ``fd`` and never changes its flags.  With ``pipe_size``, the first write that fills a pipe
    grows it to that many bytes, once (a bigger pipe is left alone; past the user's pipe page limit, or on
    what is not a pipe, nothing changes).
    """

    def __init__(self, fd: int, *, mode: WriteMode | None = None, pipe_size: int | None = None) -> None:
        self.fd = fd
        #: How writes are made (see the module docstring); ``nowait`` may fall
        #: back to ``thread`` on the first write if the file refuses the flag.
        self.mode: WriteMode = mode if mode is not None else _initial_mode(fd)
        self._grow_to = pipe_size

    async def write(self, data: bytes) -> None:
        """Write all of ``data``; waits (never blocks the thread) while the reader is behind."""
        if not data:
            return
        try:
            if self.mode == "nowait":
                await self._write_nowait(data)
            elif self.mode == "direct":
                self._write_all(data)
            else:
                await trio.to_thread.run_sync(self._write_all, data)
        except OSError as exc:
            if exc.errno in _CLOSED_ERRNOS:
                raise AgentrtError(OUTPUT_CLOSED, f"writing to fd {self.fd}: {os.strerror(exc.errno or 0)}") from None
            raise

    async def _write_nowait(self, data: bytes) -> None:
        view = memoryview(data)
        flags = os.RWF_NOWAIT
        pwritev = os.pwritev
        while view:
            try:
                # Offset -1: the file's current position, as write(2) does.
                written = pwritev(self.fd, (view,), -1, flags)
            except BlockingIOError:
                if not self._grown():
                    await trio.lowlevel.wait_writable(self.fd)
                continue
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED_ERRNOS:
                    raise
                self.mode = "thread"
                await trio.to_thread.run_sync(self._write_all, bytes(view))
                return
            if written < len(view) and self._grow_to is not None:
                self._grown()  # the pipe is full: the rest may fit once it is bigger
            view = view[written:]

    def _grown(self) -> bool:
        # Once: grow the pipe to pipe_size; True when it is bigger now.
        size, self._grow_to = self._grow_to, None
        if size is None or sys.platform != "linux":
            return False
        import fcntl

        try:
            current = fcntl.fcntl(self.fd, fcntl.F_GETPIPE_SZ)
            return current < size and fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, size) > current
        except OSError:  # not a pipe (EBADF, EINVAL), or past the user's pipe page limit (EPERM)
            return False

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
