"""Spawning children that die with their owner.

Every child gets its own process group (a new session), exactly the given
environment, no shell, and on Linux ``PR_SET_PDEATHSIG(SIGKILL)`` set in the
child before ``exec``: when the owner dies, even by SIGKILL, the kernel kills
the child too.

The kernel sends the death signal when the *thread* that forked the child
exits, not the process.  ``trio.lowlevel.open_process`` forks in a worker
thread of trio's cache, which retires after a few idle seconds and would take
healthy children with it.  So the forking thread here is always one of four
spawner threads that live as long as the process: daemon threads blocked on
one queue, which end only when the process does.  A forked copy of the owner
starts its own spawner threads (and spawn servers) on first use.

Setting the signal needs code between ``fork`` and ``exec``, which rules out
``vfork``; forking the owner itself (a large Python process, with the GIL
held across the fork) cost milliseconds per child.  So children are started
by spawn servers (:mod:`agentrt._os.spawn_server`, driven by
:mod:`agentrt._os.spawn_client`): small single-threaded processes, themselves
forked once from a spawner thread, that fork each child with ``CLONE_PARENT``.
The child is then the *owner's* child, as if a spawner thread had forked it:
the owner holds its pidfd, waits for it, and its death signal follows that
spawner thread.  After ``prctl``, the child checks that its parent is still
the owner: if the owner died first no signal would ever come, so it kills
itself.  No window is left in which a child runs without the signal.

Where no spawn server can run (an architecture whose ``clone`` number we do
not know, an interpreter that will not start without extra environment), or
for a request too large for one message, the spawner thread forks the child
itself with ``preexec_fn`` doing the same two steps.  The Python documentation
warns about ``preexec_fn`` when other threads exist: a lock held by another
thread at ``fork`` time stays held in the child.  Our function takes none:
CPython forks with the GIL held and re-initialises its own locks in the
child, glibc resets its malloc locks across ``fork``, and the function only
makes two syscalls through a ``prctl`` binding resolved before any fork.

The spawn servers belong to the trio run that started them: when it ends
(returns, raises or is cancelled) a system task of that run stops and reaps
them, so nothing agentrt started outlives ``trio.run``; the children
themselves are stopped by their owners' scopes.  ``keep_warm`` in
:mod:`agentrt._os.spawn_client` (public as
``agentrt.lowlevel.keep_spawn_servers``) keeps them across runs instead.

Elsewhere than Linux there is no death signal: spawning goes through
``trio.lowlevel.open_process`` unchanged and children are stopped by their
owner's bounded stop only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import outcome
import trio

from . import spawn_batch, spawn_client
from .spawn_process import LinuxProcess as _LinuxProcess
from .spawn_process import OwnedProcess

__all__ = ["OwnedProcess", "open_owned_process", "DEATH_SIGNAL_SUPPORTED"]

DEATH_SIGNAL_SUPPORTED = sys.platform == "linux" and hasattr(os, "pidfd_open")
"""True where children die with their owner (Linux ≥ 5.3: ``prctl`` and pidfds)."""

_PR_SET_PDEATHSIG = 1


# --- the spawner thread ------------------------------------------------------------

# Forks overlap: while one child is between fork and exec (scheduled late on a
# busy machine), another thread forks the next.  Starting many children at once
# (bench/many.py) took half the time with 4 threads as with one; 8 gained no more.
_SPAWNERS = 4
_Job = tuple[Callable[[], Any], Callable[[outcome.Outcome[Any]], None]]
_queue_lock = threading.Lock()
_jobs: queue.SimpleQueue[_Job] | None = None


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        fn, deliver = jobs.get()
        deliver(outcome.capture(fn))


def _spawner() -> queue.SimpleQueue[_Job]:
    global _jobs
    with _queue_lock:
        if _jobs is None:
            jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
            for i in range(_SPAWNERS):
                threading.Thread(target=_serve, args=(jobs,), name=f"agentrt-spawner-{i}", daemon=True).start()
            _jobs = jobs
        return _jobs


def _forget_spawner() -> None:
    # A forked copy of the owner has no spawner thread: start a new one on demand.
    global _jobs, _queue_lock
    _jobs = None
    _queue_lock = threading.Lock()
    spawn_client.forget()


if DEATH_SIGNAL_SUPPORTED:
    os.register_at_fork(after_in_child=_forget_spawner)
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
    _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _prctl.restype = ctypes.c_int


# Every signal a child can have ignored: exec keeps an ignored signal ignored
# (and the mask), so one the owner inherited (nohup's SIGHUP, a background
# job's SIGINT and SIGQUIT) would reach the agent.  Handled ones reset at exec.
_RESETTABLE = tuple(sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}))


def _start_clean() -> None:
    """In the child, between fork and exec: every signal at its default, none blocked."""
    for signum in _RESETTABLE:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def _die_with(owner: int) -> Callable[[], None]:
    def set_death_signal() -> None:  # runs in the child, between fork and exec
        if _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != owner:
            # The owner died before prctl took effect: no signal will come.
            os.kill(os.getpid(), signal.SIGKILL)
        _start_clean()

    return set_death_signal


async def _in_spawner(fn: Callable[[], Any]) -> Any:
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    box: list[outcome.Outcome[Any]] = []

    def deliver(result: outcome.Outcome[Any]) -> None:
        box.append(result)
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(done.set)

    _spawner().put((fn, deliver))
    # Not cancellable (as trio's own spawn): a fork is bounded, and a child
    # started after our caller left would have no owner to stop it.
    with trio.CancelScope(shield=True):
        await done.wait()
    return box[0].unwrap()


def _parent_end(to_child: bool) -> tuple[trio.lowlevel.FdStream, int]:
    read_fd, write_fd = os.pipe()  # both non-inheritable; Popen dup2s the child end
    if to_child:
        return trio.lowlevel.FdStream(write_fd), read_fd
    return trio.lowlevel.FdStream(read_fd), write_fd


async def open_owned_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    stdin: int = subprocess.DEVNULL,
    stdout: int = subprocess.PIPE,
    stderr: int = subprocess.PIPE,
) -> OwnedProcess:
    """Spawn ``argv`` in its own process group, so that it dies with its owner (Linux).

    ``argv[0]`` should be absolute; it runs without a shell, with exactly
    ``env``, all other descriptors closed.  ``stdin``/``stdout``/``stderr`` take
    ``subprocess.PIPE`` or ``subprocess.DEVNULL`` (``stderr`` also
    ``subprocess.STDOUT``); piped ends are trio streams on the result.  Raises
    ``OSError`` (or ``subprocess.SubprocessError``) when it cannot start.
    Reaping stays the caller's job (:meth:`OwnedProcess.wait`).
    """
    if not DEATH_SIGNAL_SUPPORTED:
        proc: OwnedProcess = await trio.lowlevel.open_process(
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=dict(env), cwd=cwd,
            start_new_session=True, close_fds=True, preexec_fn=_start_clean,
        )
        return proc
    ours: list[trio.lowlevel.FdStream] = []
    theirs: list[int] = []
    try:
        streams: list[trio.lowlevel.FdStream | None] = []
        child: list[int] = []
        for which, to_child in ((stdin, True), (stdout, False), (stderr, False)):
            if which == subprocess.PIPE:
                stream, fd = _parent_end(to_child)
                ours.append(stream)
                theirs.append(fd)
                streams.append(stream)
                child.append(fd)
            else:
                streams.append(None)
                child.append(which)
        if stderr == subprocess.STDOUT and stdout == subprocess.PIPE:
            child[2] = child[1]
        pid = await _from_server(argv, env, cwd, child, theirs)
        if pid is not None:
            return _LinuxProcess(pid, streams[0], streams[1], streams[2])
        popen: subprocess.Popen[bytes] = await _in_spawner(
            lambda: subprocess.Popen(
                list(argv),
                stdin=child[0],
                stdout=child[1],
                stderr=child[2],
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
                preexec_fn=_die_with(os.getpid()),
            )
        )
    except BaseException:
        for stream in ours:
            stream.close()
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    return _LinuxProcess(popen.pid, streams[0], streams[1], streams[2], popen=popen)


def _start_server(argv: list[str], fd: int) -> subprocess.Popen[bytes]:
    # Runs in a spawner thread: the server's death signal, and through
    # CLONE_PARENT its children's, follow that long-lived thread.
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Symbols bound at start, once: else each child binds the ones it calls
        # first (getppid, setsid, execve, ...), a copy-on-write fault per page touched.
        env={"LD_BIND_NOW": "1"},
        pass_fds=(fd,),
        start_new_session=True,
        preexec_fn=_die_with(os.getpid()),
    )


# Per run: server index -> set once a start under way has ended.
_starts: trio.lowlevel.RunVar[dict[int, trio.Event]] = trio.lowlevel.RunVar("agentrt_spawn_server_starts")


async def _server(index: int) -> socket.socket | None:
    """Server ``index``'s socket, started if needed; ``None`` where none can run.

    Many spawns at once all find the server not started yet: one of them
    starts it (a Python start-up, in a spawner thread) and the others wait
    for that here, instead of each queueing a thread hop behind it.
    """
    try:
        starts = _starts.get()
    except LookupError:
        starts = {}
        _starts.set(starts)
    pending = starts.get(index)
    sock: socket.socket | None
    if pending is not None:
        await pending.wait()
        sock = spawn_client.running(index)
        if sock is not None or not spawn_client.supported():
            return sock
    done = starts[index] = trio.Event()
    try:
        sock = await _in_spawner(lambda: spawn_client.ensure(index, _start_server))
    finally:
        if starts.get(index) is done:
            del starts[index]
        done.set()
    return sock


async def _from_server(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None, child: list[int], theirs: list[int]
) -> int | None:
    """Start the child through the spawn server; ``None``: fork it here instead (no server, large request)."""
    if not spawn_client.supported():
        return None
    # The servers are this run's: stopped and reaped when it ends.  Held from the
    # run's first spawn, so that the run's set of tasks does not change later.
    spawn_client.own_for_this_run()
    if not spawn_client.wanted():
        return None
    index = spawn_client.next_server()
    sock = spawn_client.running(index)
    if sock is None:
        sock = await _server(index)
        if sock is None:
            return None
    fds = []
    for fd in child:
        if fd == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            theirs.append(fd)
        fds.append(fd)
    # Not cancellable (as trio's own spawn; spawn_batch waits uncancellably,
    # bounded by its hang guard): a child started after our caller left would
    # have no owner to stop it.
    return await spawn_batch.spawn(sock, argv, env, cwd, fds)
