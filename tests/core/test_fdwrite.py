"""FdWriter: stdout writes from the trio thread, in order, waiting (not blocking) on a full pipe."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from agentrt.errors import AgentrtError
from agentrt.sinks import OUTPUT_CLOSED, FdWriter

# Reads stdin to EOF and prints its length and sha256: the reader is a real process.
READER = "import sys, hashlib; d = sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest())"


def _records(n: int) -> list[bytes]:
    return [f"{i:08d} {'x' * (i % 300)}\n".encode() for i in range(n)]


async def test_pipe_writes_keep_order_and_wait_for_a_reader_without_blocking_the_thread() -> None:
    r, w = os.pipe()
    writer = FdWriter(w)
    assert writer.mode == "nowait"
    records = _records(20_000)  # ~3 MB: many times a pipe's capacity
    done = trio.Event()

    async def write_all() -> None:
        for i in range(0, len(records), 100):
            await writer.write(b"".join(records[i : i + 100]))
        done.set()

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_all)
                # Nobody reads yet: the pipe fills and the writer parks in trio,
                # leaving the thread to every other task.
                await trio.testing.wait_all_tasks_blocked()
                assert not done.is_set()
                reader = subprocess.Popen([sys.executable, "-c", READER], stdin=r, stdout=subprocess.PIPE)
                os.close(r)
                r = -1
                await done.wait()
                os.close(w)
                w = -1
            out, _ = await trio.to_thread.run_sync(reader.communicate)
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    data = b"".join(records)
    assert out.split() == [str(len(data)).encode(), hashlib.sha256(data).hexdigest().encode()]


async def test_the_shared_file_description_keeps_its_flags() -> None:
    r, w = os.pipe()
    try:
        before = fcntl.fcntl(w, fcntl.F_GETFL)
        await FdWriter(w).write(b"hello\n")
        assert fcntl.fcntl(w, fcntl.F_GETFL) == before  # never O_NONBLOCK: other holders keep blocking writes
        assert os.read(r, 100) == b"hello\n"
    finally:
        os.close(r)
        os.close(w)


async def test_a_closed_reader_is_output_closed() -> None:
    r, w = os.pipe()
    os.close(r)
    try:
        with pytest.raises(AgentrtError) as caught:
            await FdWriter(w).write(b"x")
        assert caught.value.code == OUTPUT_CLOSED
    finally:
        os.close(w)


async def test_a_reader_that_goes_away_wakes_a_waiting_writer_with_output_closed() -> None:
    r, w = os.pipe()
    writer = FdWriter(w)
    outcome: list[str] = []

    async def write_big() -> None:
        try:
            await writer.write(b"y" * (4 << 20))
        except AgentrtError as exc:
            outcome.append(exc.code)

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_big)
                await trio.testing.wait_all_tasks_blocked()  # the pipe is full, the writer waits
                assert outcome == []
                os.close(r)
                r = -1
    finally:
        if r >= 0:
            os.close(r)
        os.close(w)
    assert outcome == [OUTPUT_CLOSED]


async def test_regular_files_are_written_directly_and_the_thread_fallback_works(tmp_path: Path) -> None:
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        writer = FdWriter(fd)
        assert writer.mode == "direct"
        await writer.write(b"one\n")
        await FdWriter(fd, mode="thread").write(b"two\n")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"one\ntwo\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
async def test_a_pipe_grows_once_when_a_write_fills_it_and_only_then() -> None:
    size = 256 * 1024
    r, w = os.pipe()
    try:
        default = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
        assert default < size
        writer = FdWriter(w, pipe_size=size)
        await writer.write(b"x" * 100)  # fits: the pipe keeps its size
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) == default
        assert os.read(r, 200) == b"x" * 100
        # A write past the default size fills the pipe: it grows, and the whole write fits with no reader.
        data = bytes(range(256)) * ((default + 4096) // 256)
        with trio.fail_after(60):  # a hang guard only: nobody reads until the write is done
            await writer.write(data)
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) == size
        got = b""
        while len(got) < len(data):
            got += os.read(r, 1 << 20)
        assert got == data
        # Once: a pipe made smaller again is left as it is, even when a write fills it.
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, default)
        await _write_while_draining(writer, r, b"y" * (default * 3))
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) == default
    finally:
        os.close(r)
        os.close(w)


async def _write_while_draining(writer: FdWriter, r: int, data: bytes) -> None:
    async def drain() -> None:
        got = b""
        while len(got) < len(data):
            await trio.lowlevel.wait_readable(r)
            got += os.read(r, 1 << 20)
        assert got == data

    with trio.fail_after(60):  # a hang guard only
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await writer.write(data)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_GETPIPE_SZ is Linux's")
async def test_without_pipe_size_a_full_pipe_keeps_its_size() -> None:
    r, w = os.pipe()
    try:
        default = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
        await _write_while_draining(FdWriter(w), r, b"z" * (default * 3))
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) == default
    finally:
        os.close(r)
        os.close(w)
