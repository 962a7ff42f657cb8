"""The host engine on real child processes: :func:`agentrt.lowlevel.pump_events` and :class:`Fanout`.

The children are small Python fixture programs; the codec is a fixture too
(one ``status`` event per JSON line), so what is tested is the loop: order,
malformed and oversize policy, end of output after the exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import trio

from agentrt.dialect import HostCodec, Turn
from agentrt.events import Diagnostic, Event, EventBatch, Status, TextDelta
from agentrt.lowlevel import (
    MALFORMED_LINE,
    MAX_LINE_BYTES,
    Fanout,
    ProcessSpec,
    open_process,
    pump_events,
)

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def py(code: str) -> ProcessSpec:
    return ProcessSpec(argv=(sys.executable, "-S", "-c", code), env=ENV)


class FixtureCodec(HostCodec):
    """One ``status`` event per JSON line (its ``n``), and one more at end of output."""

    def encode_turn(self, turn: Turn) -> bytes:
        return b"\n"

    def decode(self, obj: Any) -> Sequence[Event]:
        return (Status(kind="line", label=str(obj.get("n"))),)

    def finish(self) -> Sequence[Event]:
        return (Status(kind="end"),)


def _labels(events: list[Event]) -> list[str]:
    out = []
    for ev in events:
        if isinstance(ev, Status):
            out.append(ev.label or ev.kind)
        elif isinstance(ev, Diagnostic):
            out.append(ev.code)
    return out


async def _pump(
    code: str, *, keep_reading: bool, exit_grace: float = 2.0, codec: HostCodec | None = None
) -> tuple[Any, list[str], list[str]]:
    """``code``'s output through ``codec`` (the fixture codec by default): result, labels, labels before oversize."""
    seen: list[Event] = []
    before_oversize: list[Event] = []

    async def on_events(events: list[Event]) -> None:
        seen.extend(events)

    with trio.fail_after(60):  # a hang guard only
        async with open_process(py(code)) as proc:

            async def on_oversize(before: list[Event]) -> bool:
                before_oversize.extend(before)
                seen.extend(before)
                seen.append(Diagnostic(code="oversize"))
                if keep_reading:
                    await proc.send(b"go\n")  # the fixture writes its next line only now
                return keep_reading

            result = await pump_events(
                proc, codec or FixtureCodec(), on_events, on_oversize=on_oversize, exit_grace=exit_grace
            )
            await proc.stop()
    return result, _labels(seen), _labels(before_oversize)


FLOOD = (
    "import sys; w = sys.stdout.buffer.write\n"
    "w(b'{\"n\": 1}\\n' + b'x' * " + str(MAX_LINE_BYTES + 10) + " + b'\\n'); sys.stdout.flush()\n"
    "if sys.stdin.readline(): w(b'{\"n\": 2}\\n')\n"
)


async def test_oversize_line_read_on_when_the_policy_says_so() -> None:
    result, seen, before = await _pump(FLOOD, keep_reading=True)
    # The line before comes first, with the oversize call or before it (chunking decides).
    assert seen[:2] == ["1", "oversize"] and before in ([], ["1"])
    # The rest of the long line went with the failed framing; a later line is read as usual.
    assert seen[-2:] == ["2", "end"]
    assert result.eof and not result.oversize


async def test_oversize_line_stops_reading_when_the_policy_says_so() -> None:
    result, seen, before = await _pump(FLOOD, keep_reading=False)
    assert before in ([], ["1"])
    assert seen == ["1", "oversize"]  # neither the later line nor the codec's end-of-output events
    assert result.oversize and not result.eof


async def test_malformed_lines_are_diagnostics_in_their_place() -> None:
    code = "import sys; sys.stdout.write('{\"n\": 1}\\nnot json\\n{\"n\": 2}\\n{\"n\": 3}')"
    result, seen, _ = await _pump(code, keep_reading=False)
    assert seen == ["1", MALFORMED_LINE, "2", "3", "end"]  # the unterminated last line is parsed at EOF
    assert result.eof


async def test_reading_ends_after_the_exit_while_a_grandchild_holds_stdout() -> None:
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(600)'])\n"
        "sys.stdout.write('{\"n\": 1}\\n')\n"
    )
    result, seen, _ = await _pump(code, keep_reading=False, exit_grace=0.2)
    assert seen == ["1", "end"]
    assert not result.eof  # cut off after the grace: the grandchild never closed the pipe


class _Sink:
    def __init__(self, name: str, *, fail: set[int] = frozenset(), policy: str = "block") -> None:  # type: ignore[assignment]
        self.name = name
        self.policy = policy
        self.buffer_size = 1
        self.fail = fail
        self.batches: list[EventBatch] = []
        self.closed = False

    async def handle(self, batch: EventBatch) -> None:
        if batch.first_seq in self.fail:
            raise RuntimeError(f"boom at {batch.first_seq}")
        self.batches.append(batch)

    async def aclose(self) -> None:
        self.closed = True


def _batch(seq: int, source: str = "s") -> EventBatch:
    return EventBatch(source=source, first_seq=seq, mono=0.0, wall=0.0, events=(TextDelta(text=str(seq)),))


async def test_fanout_reports_failures_through_the_callback_and_keeps_delivering() -> None:
    reported: list[Diagnostic] = []
    flaky = _Sink("flaky", fail={1})
    good = _Sink("good")
    async with trio.open_nursery() as nursery:
        fanout = Fanout(nursery, [flaky, good], on_failure=reported.append)
        for seq in range(4):
            await fanout.send(_batch(seq))
        await fanout.aclose()
    assert [ev.code for ev in reported] == ["sink_failed"] and "flaky" in reported[0].detail
    assert [b.first_seq for b in flaky.batches] == [0, 2, 3]
    assert [b.first_seq for b in good.batches] == [0, 1, 2, 3]
    assert fanout.failures == {"flaky": 1}
    assert flaky.closed and good.closed


async def test_fanout_detaches_after_max_failures_in_a_row() -> None:
    reported: list[Diagnostic] = []
    broken = _Sink("broken", fail={0, 1, 2, 3})
    async with trio.open_nursery() as nursery:
        fanout = Fanout(nursery, [broken], on_failure=reported.append, max_failures=1)
        for seq in range(4):
            await fanout.send(_batch(seq))
        await fanout.aclose()
    assert [ev.code for ev in reported] == ["sink_detached"]
    assert "sink 'broken' failed and was detached" in reported[0].detail


async def test_fanout_without_coalescing_keeps_every_batch_of_every_source() -> None:
    slow = _Sink("slow", policy="coalesce")
    async with trio.open_nursery() as nursery:
        fanout = Fanout(nursery, [slow], coalesce=False)
        for seq in range(6):  # no checkpoint for the sink's task in between: it falls behind
            await fanout.send(_batch(seq, source=f"bot{seq % 2}"))
        await fanout.aclose()
    assert [(b.source, b.first_seq) for b in slow.batches] == [(f"bot{i % 2}", i) for i in range(6)]


async def test_fanout_hands_a_batch_over_without_a_schedule_point_while_the_buffer_has_room() -> None:
    # The pump already yields at every read: a second trip through trio's scheduler per
    # batch, in the hand-over, is only paid when a block sink's buffer is full.
    import trio.testing

    sink = _Sink("one")  # a buffer of one batch
    async with trio.open_nursery() as nursery:
        fanout = Fanout(nursery, [sink], coalesce=False)
        await trio.testing.wait_all_tasks_blocked()  # the sink's task waits for its first batch
        with trio.testing.assert_no_checkpoints():
            await fanout.send(_batch(0))  # to the waiting task: handed over at once
            await fanout.send(_batch(1))  # room in the buffer: the same
        with trio.testing.assert_checkpoints():
            await fanout.send(_batch(2))  # full until the sink's task runs: it waits
        await fanout.aclose()
    assert [b.first_seq for b in sink.batches] == [0, 1, 2]


class _ScriptedStdout:
    """A fixture stdout: hands out scripted chunks (full or short reads), so the loop's choices are exact.

    Its descriptor is a real pipe holding as many bytes as the script still has to hand out (up to
    32 KiB), so that asking the pipe whether anything waits (FIONREAD) tells the truth.
    """

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.reads: list[tuple[int, int]] = []  # (asked, got)
        self._r, self._w = os.pipe()
        self._mirror()

    def _mirror(self) -> None:
        waiting = min(sum(len(c) for c in self.chunks), 32 * 1024)
        os.set_blocking(self._r, False)
        try:
            while os.read(self._r, 65536):
                pass
        except BlockingIOError:
            pass
        if waiting:
            os.write(self._w, b"x" * waiting)

    async def receive_some(self, max_bytes: int) -> bytes:
        chunk = self.chunks.pop(0)[:max_bytes] if self.chunks else b""
        self.reads.append((max_bytes, len(chunk)))
        self._mirror()
        return chunk

    def stdout_fileno(self) -> int:
        return self._r

    @property
    def pipes(self) -> _ScriptedStdout:
        return self  # the process and its pipes in one: the pump reads through ``proc.pipes``

    def end_output_after_exit(self, grace: float) -> bool:
        return False

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)

    output_cut = False


async def _no_oversize(before: list[Event]) -> bool:
    raise AssertionError("no line is oversize")


def _lines_of(size: int, start: int) -> bytes:
    out = b"".join(b'{"n":%d}\n' % n for n in range(start, start + size // 8))
    return out[: out.rfind(b"\n", 0, size) + 1]


async def test_a_parkable_pump_reads_on_through_full_reads_and_parks_when_the_pipe_runs_dry() -> None:
    from agentrt._wire import Pump
    from agentrt.lowlevel import READ_SIZE

    full = _lines_of(READ_SIZE, 0) + b'{"n":-1}\n' * 40  # longer than a read: the read is full
    short = b'{"n":"short"}\n'
    stdout = _ScriptedStdout([full[:READ_SIZE], full[READ_SIZE:], short, b'{"n":"woken"}\n'])
    seen: list[Event] = []
    asked_at: list[int] = []
    parking = [True]

    async def on_events(events: list[Event]) -> None:
        seen.extend(events)

    def park() -> bool:
        asked_at.append(len(stdout.reads))
        return parking[0]

    pump = Pump(stdout, FixtureCodec(), on_events, on_oversize=_no_oversize)  # type: ignore[arg-type]
    with trio.fail_after(60), contextlib.closing(stdout):  # a hang guard only
        assert await pump.run(park) is None  # parked
        # Asked only once the pipe ran dry: after the short second read, not after the full first one.
        assert asked_at == [2]
        assert stdout.reads[0] == (READ_SIZE, READ_SIZE)
        assert _labels(seen)[-1] == "-1"
        assert await pump.run(park) is None  # woken: it reads what woke it, short again, and parks
        assert _labels(seen)[-1] == "short" and asked_at == [2, 3]
        parking[0] = False  # the owner is busy now: read on to the end
        result = await pump.run(park)
    assert result is not None and result.eof
    assert _labels(seen)[-2:] == ["woken", "end"]


async def test_a_burst_that_ends_on_a_full_read_still_lets_the_pump_park() -> None:
    # The last read of a burst can be exactly as long as asked: the pipe, asked, holds nothing,
    # so the pump parks there rather than wait in a read with a task of its own.
    from agentrt._wire import Pump
    from agentrt.lowlevel import READ_SIZE

    exact = _lines_of(READ_SIZE, 0)
    exact += b"\n" * (READ_SIZE - len(exact))  # blank lines fill it to the byte
    stdout = _ScriptedStdout([exact])  # nothing more is written yet: nothing waits after the full read
    asked_at: list[int] = []

    async def on_events(events: list[Event]) -> None:
        pass

    def park() -> bool:
        asked_at.append(len(stdout.reads))
        return True

    pump = Pump(stdout, FixtureCodec(), on_events, on_oversize=_no_oversize)  # type: ignore[arg-type]
    with trio.fail_after(60), contextlib.closing(stdout):  # a hang guard only
        assert await pump.run(park) is None
    assert stdout.reads == [(READ_SIZE, READ_SIZE)] and asked_at == [1]


async def test_a_busy_owner_spares_the_pipe_its_question_after_full_reads(monkeypatch: Any) -> None:
    # While a turn is in flight the pump cannot park, so asking the pipe after each full
    # read (an ioctl per read of a long turn) is for nothing: ``idle`` says so first.
    from agentrt import _wire
    from agentrt._wire import Pump
    from agentrt.lowlevel import READ_SIZE

    asked: list[int] = []
    real = _wire.drained

    def drained(fd: int | None) -> bool:
        asked.append(len(stdout.reads))
        return real(fd)

    monkeypatch.setattr(_wire, "drained", drained)
    burst = _lines_of(2 * READ_SIZE, 0) + b'{"n":-1}\n' * 4000
    stdout = _ScriptedStdout([burst[:READ_SIZE], burst[READ_SIZE : 2 * READ_SIZE], burst[2 * READ_SIZE :]])
    assert len(burst) - 2 * READ_SIZE < READ_SIZE
    idle = [False]
    parked_at: list[int] = []

    async def on_events(events: list[Event]) -> None:
        if len(stdout.reads) == 2:
            idle[0] = True  # the turn ends with the second read's events

    def park() -> bool:
        parked_at.append(len(stdout.reads))
        return idle[0]

    pump = Pump(stdout, FixtureCodec(), on_events, on_oversize=_no_oversize)  # type: ignore[arg-type]
    with trio.fail_after(60), contextlib.closing(stdout):  # a hang guard only
        result = await pump.run(park, lambda: idle[0])
    # Busy through the first full read: not asked. Idle after the second: asked, and the
    # pipe still held the third read, so it read on; that short read parked it.
    assert asked == [2] and parked_at == [3] and result is None
    assert [got == READ_SIZE for _, got in stdout.reads] == [True, True, False]
