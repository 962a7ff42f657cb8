"""The owner's side of the spawn server (:mod:`agentrt._os.spawn_server`): start, hold and stop it.

The servers belong to the trio run that first used them: started on first
use from a long-lived spawner thread of :mod:`agentrt._os.spawn` (the children's
death signal follows that thread), and stopped and reaped by a system task of
that run when the run ends, however it ends (:func:`own_for_this_run`).  With
several runs at once (one per thread), the last one to end stops them;
:func:`keep_warm` keeps them across runs instead, until :func:`stop_servers`
or interpreter exit.  Requests go over a ``SOCK_SEQPACKET`` socket in batches
(:mod:`agentrt._os.spawn_batch`), answered on one report pipe a message and
read with trio's wait and no thread hop, so the owner spends no fork and no
GIL-held time per child.  When the server cannot start (an architecture
without a known ``clone`` number, an interpreter that will not run without
extra environment), :func:`ensure` answers ``None`` and the caller forks the
old way; so does a request too large for one message.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

import trio

from . import spawn_server

__all__ = [
    "supported", "wanted", "server_pids", "next_server", "running", "ensure", "forget",
    "own_for_this_run", "keep_warm", "stop_servers", "kill",
]

_START_TIMEOUT = 60.0

# Servers per owner, used in turn: each forks one child at a time, so two
# keep both cores of a small machine busy when many children start at once.
_SERVERS = 2

# A program that starts a few children (one `agentrt run`, a handful of bots)
# forks them itself and never pays for a server (a Python start-up, two more
# processes); from this many owned spawns on, children go through the servers.
_SERVE_AFTER = 8

_lock = threading.Lock()
# One per server index: two servers start side by side (each is a Python start-up).
_start_locks: dict[int, threading.Lock] = {}
_servers: dict[int, tuple[socket.socket, subprocess.Popen[bytes]]] = {}
_turn = itertools.count()
_broken = False
# Per run: owned spawns asked for so far (each run earns its servers anew).
_spawn_counts: trio.lowlevel.RunVar[itertools.count[int]] = trio.lowlevel.RunVar("agentrt_spawn_count")
# Per run: set once the run holds the servers (its system task will release them).
_holding: trio.lowlevel.RunVar[bool] = trio.lowlevel.RunVar("agentrt_spawn_servers_held", default=False)
_runs_holding = 0
_keep_warm = False


# Asked once per spawn: the platform's answer does not change.
_PLATFORM_SUPPORTED = sys.platform == "linux" and os.uname().machine in spawn_server._SYS_CLONE


def supported() -> bool:
    """True if a spawn server can run here (Linux on an architecture whose ``clone`` number we know)."""
    return _PLATFORM_SUPPORTED and not _broken


def stop_servers() -> None:
    """Stop the spawn servers now: killed and reaped (their children, ours, live on); idempotent.

    Not while a spawn is under way in this process (the run's end, or
    interpreter exit, is when it is called).  The next spawn that wants a
    server starts a new one.
    """
    with _lock:
        servers = list(_servers.values())
        _servers.clear()
    for sock, popen in servers:
        # They would end at end of file on their socket; killing spares the wait.
        with contextlib.suppress(OSError):
            sock.close()
        with contextlib.suppress(OSError):
            popen.kill()
        # SIGKILLed: the wait is the kernel's, not the server's.
        popen.wait()


# The backstop, for a program that ends without leaving its trio run (sys.exit in a thread, say).
atexit.register(stop_servers)


def keep_warm(keep: bool = True) -> None:
    """Keep the spawn servers across trio runs (``True``) or let each run stop them at its end (default)."""
    global _keep_warm
    _keep_warm = keep


def own_for_this_run() -> None:
    """Make the current trio run hold the servers: when it ends, the last run holding them stops them.

    Call before using (or starting) a server; cheap after the first call in a run.
    """
    global _runs_holding
    if _holding.get():
        return
    _holding.set(True)
    with _lock:
        _runs_holding += 1
    trio.lowlevel.spawn_system_task(_hold, name="agentrt spawn servers")


async def _hold() -> None:
    # A system task: cancelled once the run's main task has ended, whichever way.
    global _runs_holding
    try:
        await trio.sleep_forever()
    finally:
        with _lock:
            _runs_holding -= 1
            last = _runs_holding == 0
        if last and not _keep_warm:
            stop_servers()


def forget() -> None:
    """In a forked copy of the owner: the server belongs to the original, start a new one on demand."""
    global _lock, _runs_holding
    _runs_holding = 0
    for sock, _popen in _servers.values():
        with contextlib.suppress(OSError):
            sock.close()
    _servers.clear()
    _lock = threading.Lock()
    _start_locks.clear()


def server_pids() -> list[int]:
    """The running spawn servers' pids (children of this process until the trio run that started them ends)."""
    return [popen.pid for _sock, popen in list(_servers.values()) if popen.returncode is None]


def wanted() -> bool:
    """True once this run has asked for enough children that the servers pay for themselves.

    (Or servers kept warm from an earlier run are running: they cost nothing more.)
    """
    try:
        count = _spawn_counts.get()
    except LookupError:
        count = itertools.count()
        _spawn_counts.set(count)
    return next(count) >= _SERVE_AFTER or (_keep_warm and bool(_servers))


def next_server() -> int:
    """Which server the next spawn asks (in turn)."""
    return next(_turn) % _SERVERS


def running(index: int) -> socket.socket | None:
    """Server ``index``'s socket if it runs, else ``None`` (not started yet, or it ended)."""
    server = _servers.get(index)
    if server is not None and server[1].poll() is None:
        return server[0]
    return None


def ensure(index: int, start: Callable[[list[str], int], subprocess.Popen[bytes]]) -> socket.socket | None:
    """Return server ``index``'s socket, starting it with ``start(argv, fd)`` if needed; ``None`` if none can run.

    Blocking: runs in a spawner thread (``start`` forks from it).
    """
    global _broken
    with _lock:
        start_lock = _start_locks.setdefault(index, threading.Lock())
    with start_lock:
        server = _servers.pop(index, None)
        if server is not None:
            sock, popen = server
            if popen.poll() is None:
                _servers[index] = server
                return sock
            sock.close()
            popen.wait()
        if _broken:
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [sys.executable, "-I", "-S", spawn_server.__file__, str(theirs.fileno()), str(os.getpid())]
            popen = start(argv, theirs.fileno())
        except OSError:
            ours.close()
            _broken = True
            return None
        finally:
            theirs.close()
        ours.settimeout(_START_TIMEOUT)
        try:
            ready = ours.recv(16)
        except OSError:
            ready = b""
        if ready != b"ready":
            ours.close()
            with contextlib.suppress(OSError):
                popen.kill()
            popen.wait()
            _broken = True
            return None
        ours.setblocking(False)
        _servers[index] = (ours, popen)
        return ours


def kill(sock: socket.socket) -> None:
    """SIGKILL the server whose socket is ``sock`` (a stuck or broken one): the next spawn starts another."""
    with _lock:
        for server_sock, popen in list(_servers.values()):
            if server_sock is sock:
                with contextlib.suppress(OSError):
                    popen.send_signal(signal.SIGKILL)
