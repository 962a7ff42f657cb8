"""A pipe's size and fill, asked of the kernel (Linux); elsewhere the answers say "cannot tell".

What :class:`agentrt._wire.Pump` asks of the agent's stdout pipe: whether it is
drained (before parking the read loop) and how big it is (grown for bulk output,
given back once the output is paced again).
"""

from __future__ import annotations

import sys

__all__ = ["drained", "pipe_size"]


def drained(fd: int | None) -> bool:
    """Whether pipe ``fd`` holds nothing to read right now (FIONREAD); True where that cannot be asked."""
    if fd is None or sys.platform != "linux":
        return True
    import fcntl
    import termios

    try:
        waiting = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return True
    return int.from_bytes(waiting, sys.byteorder) == 0


def pipe_size(fd: int | None, size: int | None = None) -> int | None:
    """Pipe ``fd``'s size, after setting it to ``size`` if given; ``None`` where that cannot be done."""
    if fd is None or sys.platform != "linux":
        return None
    import fcntl

    try:
        if size is None:
            return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
        return int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size))
    except OSError:
        # EPERM past the user's pipe page limit (or pipe-max-size), EBUSY (more data
        # than the new size holds), ...: the pipe keeps its size, reading goes on.
        return None
