"""The owner's side of the spawn server (:mod:`agentrt._os.spawn_server`): start it, ask it for children.

The servers belong to the trio run that first used them: started on first
use from a long-lived spawner thread of :mod:`agentrt._os.spawn` (the children's
death signal follows that thread), and stopped and reaped by a system task of
that run when the run ends, however it ends (:func:`own_for_this_run`).  With
several runs at once (one per thread), the last one to end stops them;
:func:`keep_warm` keeps them across runs instead, until :func:`stop_servers`
or interpreter exit.  A request is one message on a ``SOCK_SEQPACKET`` socket; the answer
comes on a fresh report pipe, read with trio's wait and no thread hop, so the
owner spends no fork and no GIL-held time per child.  When the server cannot
start (an architecture without a known ``clone`` number, an interpreter that
will not run without extra environment), :func:`spawn` answers ``None`` and the
caller forks the old way; so does a request too large for one message.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import marshal
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

import trio

from . import spawn_server

__all__ = [
    "spawn", "supported", "wanted", "server_pids", "next_server", "running", "ensure", "forget",
    "own_for_this_run", "keep_warm", "stop_servers",
]

# Larger requests (huge environments) go the fork way: one message must fit the socket buffer.
_MAX_REQUEST = 64 * 1024
# Requests a batch holds before it is sent without waiting for more: the
# server clones a batch's children one after another, so a batch sent while
# the owner prepares the next keeps both busy (up to spawn_server.MAX_BATCH).
_BATCH = 16
# A batch's marshal adds at most this much to its requests' own (a list header, a bytes header per request).
_BATCH_OVERHEAD = 8
# A hang guard only: a healthy server answers in about a millisecond.
_DEADLINE = 60.0
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
_send_locks: trio.lowlevel.RunVar[trio.Lock] = trio.lowlevel.RunVar("agentrt_spawn_send_lock")
# Per run and server: the requests waiting for the task that will send them as one batch.
_Request = tuple[bytes, list[int]]
_pending: trio.lowlevel.RunVar[dict[socket.socket, list[_Request]]] = trio.lowlevel.RunVar("agentrt_spawn_pending")
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


def _request(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> bytes:
    path = os.fsencode(argv[0])
    if os.path.dirname(path):
        executables = [path]
    else:
        # As subprocess does: search the child's PATH, not ours.
        executables = [os.path.join(os.fsencode(d), path) for d in os.get_exec_path(dict(env))]
    envp = []
    for key, value in env.items():
        k, v = os.fsencode(key), os.fsencode(value)
        if not k or b"=" in k or b"\0" in k:
            raise ValueError("illegal environment variable name")
        if b"\0" in v:
            raise ValueError("embedded null byte")
        envp.append(k + b"=" + v)
    args = [os.fsencode(a) for a in argv]
    if any(b"\0" in a for a in args) or (cwd is not None and "\0" in cwd):
        raise ValueError("embedded null byte")
    return marshal.dumps((executables, args, envp, None if cwd is None else os.fsencode(cwd)))


def _send_lock() -> trio.Lock:
    try:
        return _send_locks.get()
    except LookupError:
        lock = trio.Lock()
        _send_locks.set(lock)
        return lock


async def _send(sock: socket.socket, msg: bytes, fds: list[int]) -> None:
    try:
        socket.send_fds(sock, [msg], fds)
        return
    except BlockingIOError:
        pass
    # The server is behind: queue up behind one waiter (trio allows one wait per descriptor).
    async with _send_lock():
        while True:
            try:
                socket.send_fds(sock, [msg], fds)
                return
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)


async def _submit(sock: socket.socket, request: _Request) -> None:
    """Have ``request`` sent to the server, alone or in a batch; its report pipe's write end is closed once sent.

    The first request to find none pending waits one scheduling round, so
    that the other tasks starting children at the same moment add theirs, and
    then sends them all (up to a message's worth at a time): one message and
    one server wake-up for many children instead of one each.  Whatever
    happens, every write end of the batch is closed, so every report ends
    (with no record, if unsent: "the spawn server ended").
    """
    try:
        pending = _pending.get()
    except LookupError:
        pending = {}
        _pending.set(pending)
    queue = pending.get(sock)
    if queue is not None:
        queue.append(request)
        if len(queue) < _BATCH:
            return
        # Full: this task sends it now, so the server starts on it while the rest are prepared.
        del pending[sock]
    else:
        queue = pending[sock] = [request]
        try:
            await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            taken = pending.get(sock) is not queue
            if not taken:
                del pending[sock]
        if taken:
            return  # filled up meanwhile, and sent by the task that filled it
    try:
        start = 0
        while start < len(queue):
            end, size = start, _BATCH_OVERHEAD
            while end < len(queue) and end - start < spawn_server.MAX_BATCH:
                if end > start and size + len(queue[end][0]) > _MAX_REQUEST:
                    break
                size += len(queue[end][0]) + _BATCH_OVERHEAD
                end += 1
            batch = queue[start:end]
            # One request as it is; several as a list of their own marshals (the server loads each).
            msg = batch[0][0] if len(batch) == 1 else marshal.dumps([item[0] for item in batch])
            await _send(sock, msg, [fd for item in batch for fd in item[1]])
            start = end
    finally:
        for *_, fds in queue:
            os.close(fds[-1])


async def _read_report(fd: int, data: bytearray) -> None:
    # Into the caller's buffer: what arrived before a timeout is kept.
    while True:
        try:
            chunk = os.read(fd, 256)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)
            continue
        if not chunk:
            return
        data += chunk


def _parse(data: bytes | bytearray) -> tuple[int | None, tuple[int, int] | None]:
    pid = failure = None
    i = 0
    while i < len(data):
        tag = data[i : i + 1]
        if tag == b"C" and len(data) >= i + 9:
            (pid,) = struct.unpack_from("=q", data, i + 1)
            i += 9
        elif tag == b"E" and len(data) >= i + 6:
            failure = struct.unpack_from("=iB", data, i + 1)
            i += 6
        else:
            break
    return pid, failure


def _kill_server(sock: socket.socket) -> None:
    with _lock:
        for server_sock, popen in list(_servers.values()):
            if server_sock is sock:
                with contextlib.suppress(OSError):
                    popen.send_signal(signal.SIGKILL)


async def spawn(
    sock: socket.socket, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, fds: list[int]
) -> int | None:
    """Start ``argv`` through the server with ``fds`` (stdin, stdout, stderr) as its 0, 1 and 2; return its pid.

    ``None`` means "fork it yourself" (request too large).  Raises ``OSError``
    as ``subprocess`` would (``FileNotFoundError`` for a missing executable or
    ``cwd``), ``ValueError`` for an embedded NUL.
    """
    if cwd is None:
        # The server's own directory is the owner's as it was at the server's start.
        with contextlib.suppress(OSError):
            cwd = os.getcwd()
    msg = _request(argv, env, cwd)
    if len(msg) + _BATCH_OVERHEAD > _MAX_REQUEST:
        return None
    # Non-blocking both ends (the writers, the server and the child, write a few bytes once).
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    data = bytearray()
    try:
        with trio.move_on_after(_DEADLINE) as bound:
            await _submit(sock, (msg, [*fds, write_end]))
            # Once sent, the server has its own copy of the pipe: the report ends
            # when the child has exec'd or exited and the server let go.
            await _read_report(read_end, data)
        if bound.cancelled_caught:
            # A stuck server (stopped?): end it, so the report pipe closes and
            # a child it may have started is known, killed and reaped below.
            _kill_server(sock)
            with trio.move_on_after(_DEADLINE):
                await _read_report(read_end, data)
            pid, _ = _parse(data)
            if pid is not None:
                await _kill_and_reap(pid)
            raise OSError(errno.ETIMEDOUT, "the spawn server did not answer")
    finally:
        trio.lowlevel.notify_closing(read_end)
        os.close(read_end)
    pid, failure = _parse(data)
    if failure is not None:
        if pid is not None:
            await _reap(pid)
        code, stage = failure
        if stage == 3:
            raise OSError(code, os.strerror(code))
        raise OSError(code, os.strerror(code), cwd if stage == 1 else argv[0])
    if pid is None:
        # The server ended before the child reported (it was killed): the next spawn restarts it.
        _kill_server(sock)
        raise OSError(errno.EIO, "the spawn server ended")
    return pid


async def _reap(pid: int) -> None:
    # The child exits right after reporting its failure; waiting on a pidfd keeps trio responsive.
    fd = os.pidfd_open(pid)
    try:
        with trio.move_on_after(_DEADLINE):
            await trio.lowlevel.wait_readable(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 (a zombie by now: never blocks)
    finally:
        trio.lowlevel.notify_closing(fd)
        os.close(fd)


async def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    await _reap(pid)
