"""The host read loop: stdout bytes → framing → codec → event lists, with exit watching.

One loop serves every host: :class:`~agentrt.Conversation` and the FastAgent
bot supervisor.  What differs between them is policy, passed in as callbacks:
what to do with each chunk's events, and whether to read on after an
oversize line.

The loop *is* the stdout pump: no channel sits between the pipe and the
decoder, and everything decoded from one chunk is handed over in one call, so
the per-line cost stays a few hundred nanoseconds above JSON parsing.

Bulk output (a read that comes back full: a tool result of a whole file,
a replayed session) makes the loop grow the stdout pipe to
:data:`BULK_READ_SIZE`, so the agent stalls less often on a full pipe; while
full reads bring big lines (a kibibyte or more on average) it also reads that
much at a time, so reads, loop turns and per-chunk calls per byte drop
fourfold.  Otherwise it reads :data:`~agentrt.lowlevel.READ_SIZE` at a time;
once the output is paced again (a read under 16 KiB) the pipe gets its own
size back.
Only a pipe that is actually busy grows: the kernel counts pipe pages per
user, so growing every pipe at spawn would starve the user's other pipes.

Exit is the end of the output, not EOF: a grandchild (an MCP server, a
helper) may inherit stdout and hold it open for ever, so once the process has
exited its stdout is read for at most ``exit_grace`` more seconds
(:data:`EXIT_OUTPUT_GRACE` by default), then reading ends.  That deadline is
a timer of the run's one watcher (:mod:`agentrt._os.child_watch`), not a task; and a
:class:`Pump` can park while its owner is idle, so that an idle conversation
holds no task of its own (its stdout waits in the watcher until it has data).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from ._exception_groups import collapse_single_group
from ._framing import JsonlReader, Malformed, OutputOversize
from ._process import READ_SIZE, AgentProcess
from .dialect import HostCodec
from .errors import AgentrtError
from .events import Diagnostic, Event

__all__ = [
    "BULK_READ_SIZE",
    "EXIT_OUTPUT_GRACE",
    "MALFORMED_LINE",
    "Pump",
    "PumpResult",
    "pump_events",
    "decode_objects",
    "malformed_diagnostic",
]

EXIT_OUTPUT_GRACE = 2.0
"""After the agent exits, how long its stdout is still read before reading ends anyway."""

BULK_READ_SIZE = 256 * 1024
"""The stdout pipe size, and read size, asked for once the agent's output fills whole reads.

Measured on the 100k-line bench mix: 256 KiB cut the host's CPU by about a
sixth against 64 KiB; 1 MiB chunks no longer fit the CPU caches and cost more
to split and decode than the reads they save.
"""

# Bulk reads are for big lines (a file in a tool result): past BULK_READ_SIZE /
# _BULK_LINE_BYTES lines per chunk the batches of small events live long enough
# for CPython's default collector to traverse and promote them, and 256 KiB of
# small deltas measured 20-50% dearer than 64 KiB (with tune_gc's thresholds, the same).
_BULK_LINE_BYTES = 1024
# A read this small while the pipe is grown means the output is paced again.
_PACED_BYTES = READ_SIZE // 4

MALFORMED_LINE = "malformed_output_line"
"""The code of the diagnostic that stands for a stdout line that is not JSON."""


@attrs.frozen
class PumpResult:
    """How :func:`pump_events` ended."""

    eof: bool
    """Stdout ended by itself (False: cut off ``exit_grace`` after the exit, or stopped at an oversize line)."""
    oversize: bool
    """A line passed the framing cap and ``on_oversize`` chose to stop reading."""


def malformed_diagnostic(marker: Malformed) -> Diagnostic:
    """The :data:`MALFORMED_LINE` diagnostic for a line that is not JSON."""
    return Diagnostic(
        code=MALFORMED_LINE,
        detail=f"malformed stdout line #{marker.count}: {marker.head.decode('utf-8', 'replace')}",
    )


def _drained(fd: int | None) -> bool:
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


def _pipe_size(fd: int | None, size: int | None = None) -> int | None:
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


def decode_objects(codec: HostCodec, objs: Sequence[Any]) -> list[Event]:
    """Events for parsed lines one by one; a :class:`Malformed` marker becomes a diagnostic."""
    events: list[Event] = []
    for obj in objs:
        if type(obj) is Malformed:
            events.append(malformed_diagnostic(obj))
        else:
            events.extend(codec.decode(obj))
    return events


async def pump_events(
    proc: AgentProcess,
    codec: HostCodec,
    on_events: Callable[[list[Event]], Awaitable[None]],
    *,
    on_oversize: Callable[[list[Event]], Awaitable[bool]],
    on_send_error: Callable[[AgentrtError], Awaitable[None]] | None = None,
    exit_grace: float = EXIT_OUTPUT_GRACE,
) -> PumpResult:
    """Read ``proc``'s stdout until it ends, handing each chunk's events to ``on_events``.

    * A chunk's complete lines go to the codec's one decode method,
      :meth:`~agentrt.dialect.HostCodec.decode_lines`, as bytes; the lines it
      does not take itself are parsed by the framing and given to
      :meth:`~agentrt.dialect.HostCodec.decode`, and a line that is not JSON
      is a ``malformed_output_line`` diagnostic in its place.  ``on_events``
      gets one list per chunk that completed a line, in order (possibly
      empty: lines that decode to nothing).
    * A line past :data:`~agentrt.lowlevel.MAX_LINE_BYTES`: ``on_oversize``
      gets the events of the lines before it in the same chunk and answers
      whether to read on (with fresh framing, the rest of the long line then
      arriving as ordinary lines) or to stop (the tail is then not decoded).
    * After each decoded chunk, what the codec owes the agent
      (:meth:`~agentrt.dialect.HostCodec.drain_output`) is written; a write
      failure goes to ``on_send_error`` (raised when there is none).
    * At end of output the unterminated last line and the codec's
      :meth:`~agentrt.dialect.HostCodec.finish` events are handed over.
    * Once the process has exited, reading ends ``exit_grace`` seconds later
      at the latest (:meth:`AgentProcess.end_output`).
    """
    pump = Pump(proc, codec, on_events, on_oversize=on_oversize, on_send_error=on_send_error, exit_grace=exit_grace)
    if pump.timed_by_watcher:
        result = await pump.run()
        assert result is not None
        return result
    cut = False

    async def end_output_after_exit() -> None:
        # Races the exit against end of output without a cost per chunk: the
        # loop reads on undisturbed until the grace after the exit is over.
        nonlocal cut
        await proc.exited.wait()
        await trio.sleep(exit_grace)
        cut = True
        await proc.end_output()

    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(end_output_after_exit)
            try:
                oversize = await pump._read(None)
            finally:
                nursery.cancel_scope.cancel()
    return PumpResult(eof=not cut and not oversize, oversize=bool(oversize))


class _ReadSize:
    """How much the next read asks for, and the stdout pipe's size: grown for bulk output, given back once paced.

    See the module docstring: the pipe grows to :data:`BULK_READ_SIZE` at the
    first full read, reads are that big only while full reads bring big lines,
    and a read under ``_PACED_BYTES`` gives the pipe its own size back.
    """

    __slots__ = ("_bulk", "_original", "size")

    def __init__(self) -> None:
        self.size = READ_SIZE
        # The read size of bulk output: the grown pipe's size, READ_SIZE where it could
        # not grow, 0 until output comes in full reads; ``_original`` the size it had.
        self._bulk = self._original = 0

    def after_read(self, got: int, fd: Callable[[], int | None]) -> bool:
        """Resize the pipe after a read of ``got`` bytes (``fd()`` gives its descriptor); whether the read was full."""
        full = got == self.size
        if full and not self._bulk:  # the agent writes faster than we read: a bigger pipe
            pipe = fd()
            self._original = original = _pipe_size(pipe) or 0
            grown = _pipe_size(pipe, BULK_READ_SIZE) if original else None
            self._bulk = grown if grown is not None and grown > READ_SIZE else READ_SIZE
        elif self._bulk > READ_SIZE and got < _PACED_BYTES and _pipe_size(fd(), self._original) is not None:
            # Paced again: the pages went back (the kernel counts them per user,
            # and an agent may stream for hours); the next burst grows it again.
            self._bulk = 0
        return full

    def after_lines(self, full: bool, got: int, lines: int) -> None:
        """Set the next read's size from the read's ``lines``: bulk only while full reads bring big lines."""
        self.size = self._bulk if full and lines * _BULK_LINE_BYTES <= got else READ_SIZE


class Pump:
    """The read loop of :func:`pump_events` as an object that can pause while idle.

    :meth:`run` reads as :func:`pump_events` does; given ``park``, after each
    chunk that drained the pipe (a read shorter than asked, or a full one after
    which the pipe holds nothing) it asks ``park()`` whether to stop here (``park`` itself arranges the
    wake-up, e.g. with :meth:`AgentProcess.park_stdout`) and then returns
    ``None``; a later :meth:`run` goes on where it stopped, with the same
    framing state.  The exit grace is a timer of the run's watcher where
    there is one (:attr:`timed_by_watcher`), so an idle, parked pump holds no
    task at all.
    """

    def __init__(
        self,
        proc: AgentProcess,
        codec: HostCodec,
        on_events: Callable[[list[Event]], Awaitable[None]],
        *,
        on_oversize: Callable[[list[Event]], Awaitable[bool]],
        on_send_error: Callable[[AgentrtError], Awaitable[None]] | None = None,
        exit_grace: float = EXIT_OUTPUT_GRACE,
    ) -> None:
        self._proc = proc
        self._codec = codec
        self._on_events = on_events
        self._on_oversize = on_oversize
        self._on_send_error = on_send_error
        self._reader = JsonlReader()
        self._read_size = _ReadSize()
        #: True when the run's watcher ends the output after the exit grace (no timer task needed).
        self.timed_by_watcher = proc.end_output_after_exit(exit_grace)

    async def run(
        self, park: Callable[[], bool] | None = None, idle: Callable[[], bool] | None = None
    ) -> PumpResult | None:
        """Read until the output ends (its :class:`PumpResult`), or until ``park()`` is true (``None``).

        ``idle``, when given, says cheaply whether ``park()`` could be true at all:
        while it is false (a turn is in flight) the pipe is not asked after full reads.
        """
        oversize = await self._read(park, idle)
        if oversize is None:
            return None
        cut = self._proc.output_cut
        return PumpResult(eof=not cut and not oversize, oversize=oversize)

    def _general(self, line: bytes) -> list[Event]:
        # decode_lines' way out for a line its codec does not take: the framing's
        # rules (a malformed line counted by the current reader), then decode.
        return decode_objects(self._codec, self._reader.parse(line))

    async def _read(self, park: Callable[[], bool] | None, idle: Callable[[], bool] | None = None) -> bool | None:
        """The loop itself; True when it stopped at an oversize line, None when parked."""
        proc = self._proc
        on_events = self._on_events
        decode = self._codec.decode_lines
        general = self._general
        drain = self._codec.drain_output
        sizer = self._read_size
        fd = proc.stdout_fileno
        feed = self._reader.feed_lines
        while True:
            chunk = await proc.receive_some(sizer.size)
            if not chunk:
                break
            full = sizer.after_read(len(chunk), fd)
            try:
                lines = feed(chunk)
            except OutputOversize as exc:
                if not await self._on_oversize(decode(exc.objects, general)):  # what preceded it still counts
                    return True
                self._reader = JsonlReader()  # fresh framing: the rest of the long line comes as lines
                feed = self._reader.feed_lines
                continue
            sizer.after_lines(full, len(chunk), len(lines))
            if lines:
                await on_events(decode(lines, general))
                owed = drain()
                if owed:  # a request/response protocol's next request (e.g. its handshake)
                    await self._send(owed)
            if park is not None and self._parks(park, idle, full):
                return None
        await self._end()
        return False

    async def _end(self) -> None:
        # End of output: the unterminated last line, then what the codec still owes.
        tail = decode_objects(self._codec, self._reader.finish())
        tail.extend(self._codec.finish())
        if tail:
            await self._on_events(tail)

    def _parks(self, park: Callable[[], bool], idle: Callable[[], bool] | None, full: bool) -> bool:
        # Parked only once the pipe is drained: a wake-up always reads what woke it,
        # and parking while more is waiting would cost a watcher round trip and a task
        # start per chunk of a long burst.  A short read drained it; after a full one
        # the pipe is asked (a burst may end exactly on a read's size), unless the owner
        # is busy: a turn's output comes in full reads, one ioctl each for nothing.
        if full and not ((idle is None or idle()) and _drained(self._proc.stdout_fileno())):
            return False
        return park()

    async def _send(self, owed: bytes) -> None:
        try:
            await self._proc.send(owed)
        except AgentrtError as exc:
            if self._on_send_error is None:
                raise
            await self._on_send_error(exc)
