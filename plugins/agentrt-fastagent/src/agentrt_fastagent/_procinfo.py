"""Process identity: a pid plus its start time, so a reused pid is never signalled.

On Linux the start time comes from ``/proc/<pid>/stat`` (field 22, clock ticks
since boot) plus the boot time in ``/proc/stat``; elsewhere from
``ps -o lstart= -p <pid>`` run without a shell.  All functions block: call
them through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = [
    "process_start_time", "pid_alive", "terminate_orphan", "group_members", "stop_orphan_tree", "pipe_of",
    "kill_pipe_holders",
]  # fmt: skip

_BOOT_TIME: float | None = None


def _boot_time() -> float | None:
    global _BOOT_TIME
    if _BOOT_TIME is None:
        try:
            for line in Path("/proc/stat").read_text().splitlines():
                if line.startswith("btime "):
                    _BOOT_TIME = float(line.split()[1])
                    break
        except OSError:
            return None
    return _BOOT_TIME


def _from_proc(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    boot = _boot_time()
    if boot is None or len(fields) < 20:
        return None
    ticks = int(fields[19])  # field 22 overall; fields[0] is field 3
    started = boot + ticks / os.sysconf("SC_CLK_TCK")
    stamp = _dt.datetime.fromtimestamp(started, _dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 10000:02d}Z"


def _from_ps(pid: int) -> str | None:
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True, text=True, timeout=5, check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"},
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return f"ps:{text}" if out.returncode == 0 and text else None


def process_start_time(pid: int) -> str | None:
    """A stable string naming when ``pid`` started, or ``None`` if it is not running."""
    if pid <= 0:
        return None
    if Path("/proc/self/stat").exists():
        return _from_proc(pid)
    return _from_ps(pid)


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (zombies included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _gone_or_zombie(pid: int) -> bool:
    if not pid_alive(pid):
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return not pid_alive(pid)
    after = state[state.rfind(b")") + 2 :]
    return after[:1] == b"Z"


def terminate_orphan(
    pid: int, started_at: str | None, *, term_wait: float = 3.0, kill_wait: float = 1.0, poll: float = 0.1
) -> str:
    """Stop a process left by an earlier supervisor, if it is provably that process.

    Returns ``"mismatch"`` (not running, or a different process now has the
    pid: nothing is signalled), ``"terminated"`` (gone after SIGTERM) or
    ``"killed"`` (SIGKILL needed).
    """
    current = process_start_time(pid)
    if started_at is None or current is None or current != started_at:
        return "mismatch"
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "terminated"
    deadline = time.monotonic() + term_wait
    while time.monotonic() < deadline:
        if _gone_or_zombie(pid):
            return "terminated"
        time.sleep(poll)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "terminated"
    deadline = time.monotonic() + kill_wait
    while time.monotonic() < deadline and not _gone_or_zombie(pid):
        time.sleep(poll)
    return "killed"


def _stat_fields(pid: int) -> list[bytes]:
    """``/proc/<pid>/stat`` from field 3 on (state, ppid, pgrp, ...), or [] if unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return []
    return raw[raw.rfind(b")") + 2 :].split()


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []  # no /proc: nothing can be proven ours, so nothing is swept


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``, from ``/proc`` ([] without it)."""
    out = []
    for pid in _pids():
        fields = _stat_fields(pid)
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            out.append(pid)
    return out


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _kill_and_wait(pids: list[int], wait: float, poll: float) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not all(_gone_or_zombie(p) for p in pids):
        time.sleep(poll)


def stop_orphan_tree(
    pid: int, started_at: str | None, *, marker: bytes | None = None, term_wait: float = 3.0, poll: float = 0.1
) -> tuple[str, int]:
    """Stop an earlier supervisor's bot and then what is left of its process group.

    The leader is handled by :func:`terminate_orphan` (pid and start time
    checked).  Other members of its group (the bot's grandchildren: helpers,
    MCP servers) are SIGKILLed when they are provably the bot's: members seen
    while the leader was still the recorded process (each pinned by its own
    start time), or, once the leader is gone, members whose environment holds
    ``marker`` (the bot's own ``IM_GATEWAY_DATA_DIR=...`` entry).  Returns the
    leader's outcome and how many members were killed.
    """
    known: list[tuple[int, str | None]] = []
    if started_at is not None and process_start_time(pid) == started_at:
        known = [(m, process_start_time(m)) for m in group_members(pid) if m != pid]
    outcome = terminate_orphan(pid, started_at, term_wait=term_wait, poll=poll)
    me = os.getpid()
    targets = [m for m, st in known if st is not None and process_start_time(m) == st]
    if marker is not None:
        targets += [m for m in group_members(pid) if m not in targets and m != me and _environ_has(m, marker)]
    _kill_and_wait(targets, 1.0, poll)
    return outcome, len(targets)


def pipe_of(pid: int, fd: int = 1) -> str | None:
    """The ``pipe:[inode]`` name of ``pid``'s file descriptor ``fd``, if it is a pipe."""
    try:
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    return link if link.startswith("pipe:[") else None


def kill_pipe_holders(pipe: str) -> list[int]:
    """SIGKILL every other process holding ``pipe`` open, with its group when it leads one.

    Used once a bot has exited but its stdout never reached EOF: only a
    process that inherited the pipe from the bot (a grandchild, perhaps in a
    session of its own) can still hold it, so holding it is the proof of
    identity.  Returns the holders' pids.
    """
    me = os.getpid()
    holders = []
    for pid in _pids():
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone, or not ours to read (and so not ours to signal)
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == pipe:
                    holders.append(pid)
                    break
            except OSError:
                continue
    for pid in holders:
        fields = _stat_fields(pid)
        try:
            if len(fields) > 2 and int(fields[2]) == pid:
                os.killpg(pid, signal.SIGKILL)  # it leads its own group: the group is its descendants
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return holders
