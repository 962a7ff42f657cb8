"""Bulk output grows the stdout pipe and the reads; paced output never does.

The children are Python fixture programs.  To make the first read come back
full without any timing, the bulk child fills the pipe (a non-blocking write
stops exactly at its capacity) and says so through a FIFO before the parent
reads anything.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt._wire import BULK_READ_SIZE
from agentrt.events import Event, Status
from agentrt.lowlevel import READ_SIZE, ProcessSpec, open_process, pump_events

from .test_pump import ENV, FixtureCodec

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pipe sizes are a Linux feature (F_SETPIPE_SZ)")


def _pipe_size(fd: int) -> int:
    import fcntl

    return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


def _require_growable_pipes() -> None:
    import fcntl

    r, w = os.pipe()
    try:
        if _pipe_size(r) != READ_SIZE:
            pytest.skip(f"this system's default pipe holds {_pipe_size(r)} bytes, not {READ_SIZE}")
        try:
            fcntl.fcntl(r, fcntl.F_SETPIPE_SZ, BULK_READ_SIZE)
        except OSError as exc:
            pytest.skip(f"this user may not grow pipes to {BULK_READ_SIZE} bytes: {exc}")
    finally:
        os.close(r)
        os.close(w)


# Fills the pipe without blocking, tells the parent through the FIFO (argv[1]), then
# writes the rest (LINES lines of PAD bytes); after "more" on stdin, one last small line.
BULK_CHILD = """
import os, sys
blob = b"".join(b'{"n": %d, "pad": "%s"}\\n' % (i, b"x" * PAD) for i in range(LINES))
os.set_blocking(1, False)
sent = os.write(1, blob)
try:
    os.write(1, blob[sent:])
    raise SystemExit("the pipe was not full")
except BlockingIOError:
    pass
with open(sys.argv[1], "wb") as fifo:
    fifo.write(b"full\\n")
os.set_blocking(1, True)
view = memoryview(blob)[sent:]
while view:
    view = view[os.write(1, view):]
if sys.stdin.readline() == "more\\n":
    os.write(1, b'{"n": "last"}\\n')
"""


@pytest.mark.parametrize("pad", [2000, 90])
async def test_bulk_output_grows_the_pipe_and_reads_big_lines_in_big_chunks_until_paced_again(
    tmp_path: Path, pad: int
) -> None:
    _require_growable_pipes()
    lines = 4_000_000 // (pad + 20)
    child = BULK_CHILD.replace("PAD", str(pad)).replace("LINES", str(lines))
    fifo = tmp_path / "full"
    os.mkfifo(fifo)
    # Read-write: the FIFO always has a writer (us), so a read waits for the child's line.
    sync = trio.lowlevel.FdStream(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
    labels: list[str] = []
    sizes_seen: list[int] = []
    asked: list[int] = []
    spec = ProcessSpec(argv=(sys.executable, "-S", "-c", child, str(fifo)), env=ENV)
    with trio.fail_after(60):  # a hang guard only
        async with sync, open_process(spec) as proc:
            assert await sync.receive_some(5) == b"full\n"  # the pipe holds READ_SIZE bytes now
            fd = proc.stdout_fileno()
            assert fd is not None and _pipe_size(fd) == READ_SIZE
            stream = proc.pipes.stdout

            class Counting:  # the stdout stream, each read's size noted: what the pump asked for
                async def receive_some(self, max_bytes: int) -> bytes:
                    asked.append(max_bytes)
                    return bytes(await stream.receive_some(max_bytes))

                def __getattr__(self, name: str) -> Any:
                    return getattr(stream, name)

            proc.pipes.stdout = Counting()  # type: ignore[assignment]

            async def on_events(events: list[Event]) -> None:
                labels.extend(ev.label for ev in events if isinstance(ev, Status) and ev.kind == "line")
                sizes_seen.append(_pipe_size(fd))
                if labels and labels[-1] == str(lines - 1):
                    await proc.send(b"more\n")

            async def never(_: Any) -> bool:
                raise AssertionError("no line is oversize")

            await pump_events(proc, FixtureCodec(), on_events, on_oversize=never)
            await proc.stop()
    assert labels == [str(i) for i in range(lines)] + ["last"]
    assert sizes_seen[0] == BULK_READ_SIZE  # grown right after the first (full) read
    assert asked[0] == READ_SIZE
    if pad > 1024:
        assert BULK_READ_SIZE in asked  # big lines: big reads
    else:
        # Small lines keep small reads: big batches of small events cost more than the reads saved.
        assert set(asked) == {READ_SIZE}
    # The last line came alone (paced): the pipe got its size back, the read after it is small again.
    assert sizes_seen[-1] == READ_SIZE
    assert asked[-1] == READ_SIZE


async def test_paced_output_leaves_the_pipe_and_the_reads_as_they_are() -> None:
    code = (
        "import sys\n"
        "for n in range(50):\n"
        "    sys.stdout.write('{\"n\": %d}\\n' % n); sys.stdout.flush()\n"
    )
    sizes: list[int] = []
    labels: list[str] = []
    with trio.fail_after(60):  # a hang guard only
        async with open_process(ProcessSpec(argv=(sys.executable, "-S", "-c", code), env=ENV)) as proc:
            fd = proc.stdout_fileno()
            assert fd is not None
            default = _pipe_size(fd)

            async def on_events(events: list[Event]) -> None:
                labels.extend(ev.label for ev in events if isinstance(ev, Status) and ev.kind == "line")
                sizes.append(_pipe_size(fd))

            async def never(_: Any) -> bool:
                raise AssertionError("no line is oversize")

            await pump_events(proc, FixtureCodec(), on_events, on_oversize=never)
            await proc.stop()
    assert labels == [str(n) for n in range(50)]
    assert sizes and set(sizes) == {default}  # less than a full read at a time: never grown
