"""The agent's wire as a turn uses it: stdin and stdout, the line cut, and the read loop.

A turn crosses this module twice.  The prompt goes out through :meth:`Pipes.send`
(one ``send_all`` on stdin, then the raw tap); the reply comes back through
:meth:`Pump.read`: :meth:`Pipes.receive_some` reads a chunk (and taps it),
:meth:`LineCut.cut` cuts its complete lines (:data:`MAX_LINE_BYTES` cap), the
codec's :meth:`~agentrt.dialect.HostCodec.decode_lines` makes the events, the
owner's ``on_events`` gets them as one list: no channel, no other layer, so the
per-line cost stays a few hundred nanoseconds above JSON parsing.  A line the
codec does not take is parsed and decoded the general way (:mod:`agentrt._line_parse`).

Bulk output (a read that comes back full: a tool result of a whole file, a
replayed session) grows the stdout pipe to :data:`BULK_READ_SIZE` and, while
full reads bring big lines (a kibibyte or more on average), reads that much at
a time: a fourth of the reads and per-chunk calls per byte.  A read under 16 KiB
gives the pipe its own size back (the kernel counts pipe pages per user).

Exit is the end of the output, not EOF (a grandchild may hold stdout open): once
the process has exited, its stdout is read for at most ``exit_grace`` more
seconds (:data:`EXIT_OUTPUT_GRACE`), a timer of the run's one watcher; and a
:class:`Pump` parks while its owner is idle: an idle conversation holds no task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import trio

from ._line_parse import LineParser, decode_objects
from ._os.pipe_size import drained, pipe_size
from .errors import AgentrtError, TurnError
from .events import Event

if TYPE_CHECKING:
    from ._process import AgentProcess
    from ._tap import RawTap
    from .dialect import HostCodec

__all__ = [
    "BULK_READ_SIZE", "EXIT_OUTPUT_GRACE", "MAX_LINE_BYTES", "READ_SIZE", "LineCut", "OutputOversize", "Pipes",
    "Pump", "PumpResult",
]  # fmt: skip

READ_SIZE = 64 * 1024
"""Bytes asked for per stdout read: a default Linux pipe holds 64 KiB, and a 256 KiB read buffer crosses glibc's
mmap threshold, which made every *small* read cost ~8 µs instead of ~0.5 µs (tests/core/bench_process.py)."""

MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest stdout line accepted, in bytes (the ``\\n`` not counted)."""

EXIT_OUTPUT_GRACE = 2.0
"""After the agent exits, how long its stdout is still read before reading ends anyway."""

BULK_READ_SIZE = 256 * 1024
"""The stdout pipe size, and read size, asked for once the agent's output fills whole reads.

On the 100k-line bench mix 256 KiB cut the host's CPU by a sixth against 64 KiB; 1 MiB chunks no
longer fit the CPU caches and cost more to split and decode than the reads they save."""

# Bulk reads are for big lines (a file in a tool result): past BULK_READ_SIZE /
# _BULK_LINE_BYTES lines per chunk the batches of small events live long enough
# for CPython's default collector to traverse and promote them, and 256 KiB of
# small deltas measured 20-50% dearer than 64 KiB (with tune_gc's thresholds, the same).
_BULK_LINE_BYTES = 1024
# A read this small while the pipe is grown means the output is paced again.
_PACED_BYTES = READ_SIZE // 4


class OutputOversize(TurnError):
    """A stdout line longer than :data:`MAX_LINE_BYTES` (code ``runtime_output_oversize``).

    ``objects``: what the failing call had cut (or parsed) from the complete
    lines *before* the oversize one, so nothing that came in the same chunk is lost.
    """

    objects: list[Any]

    def __init__(self, objects: list[Any] | None = None) -> None:
        super().__init__("runtime_output_oversize", f"a stdout line exceeded {MAX_LINE_BYTES} bytes without a newline")
        self.objects = objects if objects is not None else []


class Pipes:
    """The agent's stdin and stdout as a turn uses them: one write per send, one read per chunk, both tapped.

    :class:`~agentrt._process.AgentProcess` owns one (its ``send``,
    ``receive_some`` and ``stdout_fileno`` are these); the engine writes a
    prompt with :meth:`send` and :class:`Pump` reads with :meth:`receive_some`.
    """

    __slots__ = ("_fileno", "_lock", "ended", "refusing", "stdin", "stdout", "tap")

    def __init__(
        self, stdin: trio.abc.SendStream | None, stdout: trio.abc.ReceiveStream, fileno: Callable[[], int] | None
    ) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self._fileno = fileno  # asked per read while output is bulk: the capability was checked once
        #: Gets every chunk read and every write once written, in order (``AgentProcess.tap``).
        self.tap: RawTap | None = None
        #: Set once the output was ended on purpose: a closed stdout then reads as its end.
        self.ended = False
        #: Set once the process is being stopped: sends are refused.
        self.refusing = False
        self._lock: trio.Lock | None = None  # made on first send: a lock per idle child adds up

    async def send(self, data: bytes) -> None:
        """Write ``data`` to stdin, one attempt; ``stdin_unavailable`` when closed, never a pipe, or not read."""
        stdin = self.stdin
        if stdin is None or self.refusing:
            raise AgentrtError("stdin_unavailable", "the agent's stdin is closed")
        lock = self._lock
        if lock is None:
            lock = self._lock = trio.Lock()
        async with lock:
            try:
                await stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                raise AgentrtError("stdin_unavailable", "the agent's stdin is closed") from None
            tap = self.tap
            if tap is not None:
                tap.agent_input(data)

    async def receive_some(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next stdout chunk (at most ``max_bytes``); ``b""`` at end of output."""
        try:
            data = await self.stdout.receive_some(max_bytes)
        except trio.BrokenResourceError:
            return b""
        except trio.ClosedResourceError:
            if self.ended:
                return b""
            raise
        if type(data) is not bytes:
            data = bytes(data)
        tap = self.tap
        if tap is not None and data:
            tap.agent_output(data)
        return data

    def stdout_fileno(self) -> int | None:
        """The stdout pipe's file descriptor, ``None`` when the stream has none."""
        fileno = self._fileno
        return fileno() if fileno is not None else None

    @property
    def sending(self) -> bool:
        """A :meth:`send` is under way."""
        return self._lock is not None and self._lock.locked()

    async def close_stdin(self) -> None:
        """Close stdin (the agent sees EOF); idempotent."""
        stdin, self.stdin = self.stdin, None
        if stdin is not None:
            with trio.CancelScope(shield=True):
                await stdin.aclose()


class LineCut:
    """The host's cut of stdout into lines: each chunk's complete lines, unparsed, none past the cap.

    Lines end at ``\\n`` (a chunk that is one whole line comes back as it is, its ``\\n`` kept: JSON
    parsers skip it), blank lines are kept, the unterminated rest waits for the next chunk: any
    chunking gives the same lines.  A line past ``limit`` raises :class:`OutputOversize` (``objects``:
    the chunk's lines before it) once ``limit + 1`` bytes of it are seen, so a flood is never held
    beyond the cap plus one chunk; the cut stays failed afterwards.
    """

    __slots__ = ("_failed", "_limit", "_parts", "_pending")

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        # The unterminated tail, kept as a list of chunks so that a big line
        # arriving in many chunks is joined once, not re-concatenated per chunk.
        self._parts: list[bytes] = []
        self._pending = 0
        self._failed = False

    @property
    def pending_bytes(self) -> int:
        """Bytes of the current unterminated line held in memory."""
        return self._pending

    def cut(self, chunk: bytes) -> list[bytes]:
        """The complete lines ``chunk`` finishes, in order (see the class doc)."""
        limit = self._limit
        if not self._parts:
            last = len(chunk) - 1
            if 0 < last <= limit and chunk.find(10) == last:  # a paced agent's chunk: one whole line
                return [chunk]
        elif self._failed:
            raise OutputOversize()
        first_nl = chunk.find(10)  # an int needle takes the single-byte path
        if first_nl < 0:
            if chunk:
                self._pending += len(chunk)
                self._parts.append(chunk)
                if self._pending > limit:
                    self._fail()
            return []
        lines = chunk.split(b"\n")
        if self._parts:
            if self._pending + first_nl > limit:
                self._fail()
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
            self._parts = []
            self._pending = 0
        if len(chunk) > limit:
            # Only a chunk bigger than the cap can hold an oversize complete line
            # (a merged first line was checked above and passes here).
            for index in range(len(lines) - 1):
                if len(lines[index]) > limit:
                    self._fail(lines[:index])
        # The last item is the unterminated tail (b"" when the chunk ends with "\n").
        tail = lines.pop()
        if tail:
            if len(tail) > limit:
                self._fail(lines)
            self._parts.append(tail)
            self._pending = len(tail)
        return lines

    def finish(self) -> bytes:
        """At end of output: the last line if it had no newline (``b""`` if none)."""
        if self._failed:
            raise OutputOversize()
        line = b"".join(self._parts)
        self._parts = []
        self._pending = 0
        return line

    def _fail(self, lines: list[bytes] | None = None) -> NoReturn:
        self._failed = True
        # A non-empty list keeps cut() off its fast path, into the failed check.
        self._parts = [b""]
        self._pending = 0
        raise OutputOversize(lines)


@attrs.frozen
class PumpResult:
    """How a read loop ended (:meth:`Pump.run`, :func:`~agentrt._live.pump_events`)."""

    eof: bool
    """Stdout ended by itself (False: cut off ``exit_grace`` after the exit, or stopped at an oversize line)."""
    oversize: bool
    """A line passed the framing cap and ``on_oversize`` chose to stop reading."""


class _ReadSize:
    """How much the next read asks for, and the stdout pipe's size: grown for bulk output, given back once paced.

    The pipe grows to :data:`BULK_READ_SIZE` at the first full read, reads are that big only while
    full reads bring big lines, and a read under ``_PACED_BYTES`` gives the pipe its own size back.
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
            self._original = original = pipe_size(pipe) or 0
            grown = pipe_size(pipe, BULK_READ_SIZE) if original else None
            self._bulk = grown if grown is not None and grown > READ_SIZE else READ_SIZE
        elif self._bulk > READ_SIZE and got < _PACED_BYTES and pipe_size(fd(), self._original) is not None:
            # Paced again: the pages went back (the kernel counts them per user,
            # and an agent may stream for hours); the next burst grows it again.
            self._bulk = 0
        return full

    def after_lines(self, full: bool, got: int, lines: int) -> None:
        """Set the next read's size from the read's ``lines``: bulk only while full reads bring big lines."""
        self.size = self._bulk if full and lines * _BULK_LINE_BYTES <= got else READ_SIZE


class Pump:
    """The read loop (see the module doc), as an object that can pause while its owner is idle.

    :meth:`run` reads the process's stdout until it ends; each chunk that
    completed a line gives ``on_events`` one list (possibly empty), in order.
    At a line past :data:`MAX_LINE_BYTES`, ``on_oversize`` gets the events of
    the chunk's lines before it and answers whether to read on (a fresh cut:
    the rest of the long line comes as lines) or stop.  After each decoded
    chunk what the codec owes the agent (``drain_output``) is written, a
    failure going to ``on_send_error`` (raised without one).  At the end: the
    unterminated last line, then the codec's ``finish`` events.

    Given ``park``, after each chunk that drained the pipe it asks ``park()``
    whether to stop there (``park`` arranges the wake-up, e.g. with
    :meth:`AgentProcess.park_stdout`); a later :meth:`run` goes on with the same
    cut.  The exit grace is a timer of the run's watcher where there is one
    (:attr:`timed_by_watcher`), so a parked pump holds no task.
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
        self._pipes = proc.pipes
        self._codec = codec
        self._on_events = on_events
        self._on_oversize = on_oversize
        self._on_send_error = on_send_error
        self._cut = LineCut()
        self._parser = LineParser()  # the general lines', counting malformed ones
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
        oversize = await self.read(park, idle)
        if oversize is None:
            return None
        cut = self._proc.output_cut
        return PumpResult(eof=not cut and not oversize, oversize=oversize)

    def _general(self, line: bytes) -> list[Event]:
        # decode_lines' way out for a line its codec does not take (see agentrt._line_parse).
        return decode_objects(self._codec, self._parser.parse(line))

    async def read(self, park: Callable[[], bool] | None, idle: Callable[[], bool] | None = None) -> bool | None:
        """The loop itself; True when it stopped at an oversize line, None when parked, else False."""
        pipes = self._pipes
        receive = pipes.receive_some
        fd = pipes.stdout_fileno
        on_events = self._on_events
        decode = self._codec.decode_lines
        general = self._general
        drain = self._codec.drain_output
        sizer = self._read_size
        cut = self._cut.cut
        while True:
            chunk = await receive(sizer.size)
            if not chunk:
                break
            full = sizer.after_read(len(chunk), fd)
            try:
                lines = cut(chunk)
            except OutputOversize as exc:
                if not await self._on_oversize(decode(exc.objects, general)):  # what preceded it still counts
                    return True
                self._cut, self._parser = LineCut(), LineParser()  # the rest of the long line comes as lines
                cut = self._cut.cut
                continue
            sizer.after_lines(full, len(chunk), len(lines))
            if lines:
                await on_events(decode(lines, general))
                owed = drain()
                if owed:  # a request/response protocol's next request (e.g. its handshake)
                    try:
                        await pipes.send(owed)
                    except AgentrtError as exc:
                        if self._on_send_error is None:
                            raise
                        await self._on_send_error(exc)
            # Parked only once the pipe is drained: a wake-up always reads what woke it, and parking
            # while more waits would cost a watcher round trip and a task start per chunk of a burst.
            # A short read drained it; after a full one the pipe is asked (a burst may end exactly on a
            # read's size), unless the owner is busy (``idle``): a turn comes in full reads.
            if park is not None and (not full or ((idle is None or idle()) and drained(fd()))) and park():
                return None
        # End of output: the unterminated last line, then what the codec still owes.
        tail = self._general(self._cut.finish())
        tail.extend(self._codec.finish())
        if tail:
            await on_events(tail)
        return False
