"""Shared parts of the fault-injection suite: the scripted fixture agent's launch, one turn, and the
checks that nothing survives (processes, file descriptors)."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from agentrt import LaunchSpec
from agentrt._os import child_watch as _watch
from agentrt._os import spawn_client as _spawn_client
from agentrt._plugins import Plugins
from agentrt.events import Event, RawEvent, TextDelta, TurnCompleted, TurnFailed, TurnStarted

AGENT = Path(__file__).with_name("scripted_agent.py")
PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl"})
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "LANG": "C.UTF-8"}
# A hang guard on every step: far above what any step takes, even on a loaded machine.
STEP_GUARD = 30.0
# How long a stopping agent has between SIGTERM and SIGKILL (hang-hard ignores SIGTERM).
TERM_GRACE = 0.3

# Exits a script can end with, and the signals it may send itself (none that dumps core).
EXIT_CODES = (0, 1, 3, 7, 127)
SIGNALS = (signal.SIGHUP, signal.SIGKILL, signal.SIGUSR1, signal.SIGTERM)


def scripted_launch(directory: Path) -> tuple[LaunchSpec, Path]:
    """A launch contract for the scripted agent (an executable script in ``directory``) and its pid file."""
    directory.mkdir(parents=True, exist_ok=True)
    pids = directory / "pids"
    pids.touch()
    exe = directory / "scripted-agent"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(AGENT)!r}, run_name='__main__')\n")
    exe.chmod(0o700)
    return LaunchSpec(executable=str(exe), prefix_args=("--pids", str(pids)), model="scripted"), pids


def expected_code(script: Sequence[str]) -> str | None:
    """The terminal a script earns: None for ``turn_completed``, else the ``turn_failed`` code."""
    for action in script:
        name = action.partition(":")[0]
        if name == "terminal":
            return None
        if name == "fail":
            return "scripted_failure"  # the agent's stable code, as its result text
        if name in ("exit", "signal"):
            return "exit_before_result"
        if name == "oversize":
            return "runtime_output_oversize"
        if name in ("hang", "hang-hard"):
            return "turn_cancelled"
    raise AssertionError(f"script without an end: {script}")


def expected_detail(script: Sequence[str]) -> str | None:
    """What an ``exit_before_result`` message names: ``code=N`` or ``signal=N``."""
    for action in script:
        name, _, arg = action.partition(":")
        if name == "exit":
            return f"code={arg}"
        if name == "signal":
            return f"signal={arg}"
        if name in ("terminal", "fail", "oversize", "hang", "hang-hard"):
            return None
    return None


@attrs.define
class TurnOutcome:
    events: list[Event]
    terminal: TurnCompleted | TurnFailed
    cancelled: bool


async def run_turn(conv: Any, script: Sequence[str], *, cancel_early: bool = False) -> TurnOutcome:
    """Send one scripted turn and read it to its terminal event, cancelling it where the script hangs
    (or at once, with ``cancel_early``). Checks the turn rules every turn must keep."""
    events: list[Event] = []
    cancelled = False
    with trio.fail_after(STEP_GUARD):
        async for batch in conv.send(json.dumps(list(script))).batches():
            events.extend(batch)
            if cancelled:
                continue
            hanging = any(type(ev) is TextDelta and ev.text == "hang" for ev in batch)
            if hanging or cancel_early:
                cancelled = True
                await conv.cancel_turn()
    terminals = [ev for ev in events if isinstance(ev, (TurnCompleted, TurnFailed))]
    assert len(terminals) == 1, f"{script}: {len(terminals)} terminal events in one turn"
    assert events[-1] is terminals[0], f"{script}: events after the terminal reached the turn"
    assert isinstance(events[0], TurnStarted), f"{script}: the turn did not start with turn_started"
    late = [ev for ev in events if type(ev) is TextDelta and ev.text == "late"]
    assert not late, f"{script}: output from after a terminal reached a turn"
    return TurnOutcome(events=events, terminal=terminals[0], cancelled=cancelled)


def check_outcome(script: Sequence[str], outcome: TurnOutcome) -> None:
    """The terminal is the script's own, or ``turn_cancelled`` when the turn was cancelled first."""
    terminal = outcome.terminal
    code = None if isinstance(terminal, TurnCompleted) else terminal.code
    want = expected_code(script)
    if outcome.cancelled and code == "turn_cancelled":
        return
    assert code == want, f"{script}: ended with {code!r}, expected {want!r} ({terminal!r})"
    detail = expected_detail(script)
    if detail is not None and isinstance(terminal, TurnFailed):
        assert detail in terminal.message, f"{script}: {terminal.message!r} does not name {detail}"
    if "surrogate" in script and want is not None and want != "runtime_output_oversize":
        text = "".join(ev.text for ev in outcome.events if type(ev) is TextDelta)
        assert "a\ufffdb" in text, f"{script}: a lone surrogate did not become U+FFFD in the turn ({text[:80]!r})"


class Recorder:
    """A sink keeping every event; ``wait_sync(k)`` waits for the agent's ``fixture_sync`` line ``k``."""

    name = "fault-recorder"
    policy = "block"
    buffer_size = 64

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.synced: set[int] = set()
        self._changed = trio.Event()

    async def handle(self, batch: Any) -> None:
        for ev in batch.events:
            self.events.append(ev)
            if type(ev) is RawEvent and ev.name == "fixture_sync":
                self.synced.add(int(ev.raw["n"]))
        self._changed.set()
        self._changed = trio.Event()

    async def aclose(self) -> None:
        pass

    async def wait_sync(self, k: int) -> None:
        with trio.fail_after(STEP_GUARD):
            while k not in self.synced:
                await self._changed.wait()


# -- what survives -------------------------------------------------------------


def open_fds() -> int:
    """How many file descriptors this process has open, the long-lived ones started on demand left out.

    The spawn servers (``agentrt._os.spawn_client``) start once per trio run, after
    its first few spawns, and each keeps one socket until the run ends:
    run alone, the example that crossed that count saw them as its own leak.
    The child watcher (``agentrt._os.child_watch``) starts at the run's first spawn and
    keeps one ``epoll`` descriptor until the trio run ends: a count taken
    before any spawn saw it as one more after (issue 28: 13 before, 14 after).
    Exactly those descriptors are left out; any other one still counts.
    """
    # A copy: a spawner thread may start a server meanwhile.
    skip = {sock.fileno() for sock, _ in list(_spawn_client._servers.values())}
    try:
        skip.add(_watch._current.get()._epoll.fileno())
    except (LookupError, RuntimeError):  # no watcher in this run yet, or no trio run
        pass
    return len({int(fd) for fd in os.listdir("/proc/self/fd")} - skip)


def baseline_fds() -> int:
    """:func:`open_fds` for a count to compare with later: earlier tests' garbage collected first.

    A descriptor that an earlier test left to the garbage collector (a pipe of a
    dropped ``Popen``, say) closes whenever a collection runs: counted here
    and gone by the check, it read as a negative leak (issue 28: 35 before,
    14 after, when the suite ran after other tests).  Only the baseline is
    taken after a collection; the later count is not, so a descriptor of the
    code under test that only the collector would close still counts.
    """
    gc.collect()
    return open_fds()


def recorded_pids(path: Path) -> set[tuple[int, int]]:
    """Every (pid, start time) the scripted agents and their grandchildren wrote to ``path``."""
    found = set()
    for line in path.read_text().splitlines():
        pid, _, start = line.partition(" ")
        if start.strip():
            found.add((int(pid), int(start)))
    return found


def running(pid: int, start: int | None = None) -> bool:
    """Whether ``pid`` is a live process (a zombie has ended) started at ``start`` (clock ticks since boot)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    fields = stat[stat.rindex(b")") + 2 :].split()
    return fields[0] != b"Z" and (start is None or int(fields[19]) == start)


def marked_processes(marker: str) -> list[int]:
    """Live processes whose command line names ``marker`` (a per-run path): a pid file can miss one."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and running(int(entry)):
            found.append(int(entry))
    return found


async def wait_gone(pids: set[tuple[int, int]], *, bound: float = STEP_GUARD) -> list[int]:
    """Wait (bounded) until every pid has ended; return those still running at the bound.

    A SIGKILL is delivered asynchronously, so a just-killed grandchild may run for a moment: its
    pidfd becomes readable when it has ended, an event rather than a poll.
    """
    with trio.move_on_after(bound):
        for pid, start in sorted(pids):
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                if running(pid, start):  # else a reused pid: not ours to wait for
                    await trio.lowlevel.wait_readable(fd)
            finally:
                os.close(fd)
    return [pid for pid, start in sorted(pids) if running(pid, start)]


def kill_survivors(pids: Sequence[int]) -> None:
    """Clean up after a failed check (only the pids our own agents reported)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
