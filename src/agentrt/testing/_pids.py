"""Watching a process that is not our child: did it end?  (For tests of orphan handling.)"""

from __future__ import annotations

import os
import select
import signal

__all__ = ["PidWatch", "our_children"]


class PidWatch:
    """A pidfd on ``pid``, opened now (while the pid surely names that process).

    :meth:`gone` waits, bounded, until the process has exited: a pidfd becomes
    readable on exit, whoever the parent is and whether or not it was reaped,
    so nothing is polled on a timer.  Linux only.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd: int | None = os.pidfd_open(pid)

    def gone(self, timeout: float = 30.0) -> bool:
        """True once the process has exited; False if it still runs after ``timeout`` seconds."""
        assert self._fd is not None
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))

    def kill(self) -> None:
        """SIGKILL it if it still runs (test clean-up; the pidfd makes this safe from pid reuse)."""
        if self._fd is not None:
            try:
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """Kill it if still running and release the pidfd."""
        self.kill()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PidWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def our_children() -> list[int]:
    """Pids of this process's children, alive or zombie, except the spawn servers that start them.

    (The spawn servers of :mod:`agentrt._os.spawn_client` live as long as their
    owner; every other child should be gone once its owner stopped it.)  Linux only.
    """
    from agentrt._os.spawn_client import server_pids

    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                found.update(int(pid) for pid in handle.read().split())
        except OSError:
            continue  # the thread ended meanwhile
    return sorted(found - set(server_pids()))
