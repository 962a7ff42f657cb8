"""The capability checks a process makes per child started (``fileno_of``), without typing's per-call cost."""

from __future__ import annotations

import os

import trio
import trio.testing

from agentrt._process_events import fileno_of


class NoneFileno:
    fileno = None


async def test_fileno_of_a_pipe_stream_is_its_descriptor() -> None:
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    stream = trio.lowlevel.FdStream(read_fd)
    fileno = fileno_of(stream)
    assert fileno is not None and fileno() == read_fd
    await stream.aclose()


def test_fileno_of_a_stream_without_one_is_none() -> None:
    assert fileno_of(trio.testing.MemoryReceiveStream()) is None
    assert fileno_of(NoneFileno()) is None  # what a runtime-checkable protocol said for a None member
    assert fileno_of(object()) is None
