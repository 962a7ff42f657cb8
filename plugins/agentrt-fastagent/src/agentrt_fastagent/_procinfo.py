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

__all__ = ["process_start_time", "pid_alive", "terminate_orphan"]

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
