"""The owner's requests to a spawn server: encoded, sent in batches, answered on one report pipe a message.

:func:`spawn` asks a running server (:mod:`agentrt._os.spawn_client` starts
them) for one child.  Requests pending at the same moment go as one message
(up to :data:`agentrt._os.spawn_server.MAX_BATCH`), with one report pipe for
the whole message: each child writes its records there tagged with its place
in the batch, and the pipe reaches end of file once every child of the batch
has exec'd or exited and the server has let go.  The task that sends a
message reads its report and hands every other requester its answer; those
wait without a cancel scope or a descriptor of their own (a parked task,
uncancellable as trio's own spawn), so a child costs the owner no pipe, no
``epoll`` registration and no scope beyond its three standard streams.  The
price: a requester learns its answer when the whole batch has exec'd, and a
batch that outlives the hang guard (a stuck server, or a child that never
gets to ``exec``) fails whole with ``ETIMEDOUT``, every child it reported
killed and reaped.
"""

from __future__ import annotations

import contextlib
import errno
import marshal
import os
import signal
import socket
import struct
from collections.abc import Mapping, Sequence

import outcome
import trio

from . import spawn_client, spawn_server

__all__ = ["spawn"]

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

# A request's answer: (pid or None, (errno, stage) or None).
_Answer = tuple[int | None, tuple[int, int] | None]
_NO_ANSWER: _Answer = (None, None)


class _Request:
    """One child asked for: its marshal, its three descriptors, and where its answer goes."""

    __slots__ = ("answer", "fds", "msg", "task")

    def __init__(self, msg: bytes, fds: list[int]) -> None:
        self.msg = msg
        self.fds = fds
        self.answer: _Answer | None = None
        self.task: trio.lowlevel.Task | None = None  # set while its task waits for the answer

    def give(self, answer: _Answer) -> None:
        if self.answer is not None:
            return
        self.answer = answer
        if self.task is not None:
            trio.lowlevel.reschedule(self.task, outcome.Value(None))

    async def wait(self) -> _Answer:
        if self.answer is None:
            self.task = trio.lowlevel.current_task()
            # Not cancellable (as trio's own spawn): the sender's deadline bounds the wait,
            # and a child started after our caller left would have no owner to stop it.
            await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        assert self.answer is not None
        return self.answer


# Per run and server: the requests waiting for the task that will send them as one batch.
_pending: trio.lowlevel.RunVar[dict[socket.socket, list[_Request]]] = trio.lowlevel.RunVar("agentrt_spawn_pending")
_send_locks: trio.lowlevel.RunVar[trio.Lock] = trio.lowlevel.RunVar("agentrt_spawn_send_lock")


def _encode(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> bytes:
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


async def _read_report(fd: int, data: bytearray) -> None:
    # Into the caller's buffer: what arrived before a timeout is kept.
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)
            continue
        if not chunk:
            return
        data += chunk


def _parse(data: bytes | bytearray, count: int) -> list[_Answer]:
    """Each request's answer from a batch report (records: ``spawn_server``'s docstring)."""
    pids: list[int | None] = [None] * count
    failures: list[tuple[int, int] | None] = [None] * count
    i = 0
    while i < len(data):
        tag = data[i : i + 1]
        if tag == b"C" and len(data) >= i + 11:
            index, pid = struct.unpack_from("=Hq", data, i + 1)
            if index < count:
                pids[index] = pid
            i += 11
        elif tag == b"E" and len(data) >= i + 8:
            index, code, stage = struct.unpack_from("=HiB", data, i + 1)
            if index < count:
                failures[index] = (code, stage)
            i += 8
        else:
            break
    return list(zip(pids, failures, strict=True))


async def _send_and_answer(sock: socket.socket, batch: list[_Request]) -> None:
    """Send ``batch`` as one message with one report pipe; give every request its answer."""
    # Non-blocking both ends (the writers, the server and the children, write a few bytes each).
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    data = bytearray()
    try:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(_DEADLINE) as bound:
                try:
                    # One request as it is; several as a list of their own marshals (the server loads each).
                    msg = batch[0].msg if len(batch) == 1 else marshal.dumps([request.msg for request in batch])
                    await _send(sock, msg, [fd for request in batch for fd in request.fds] + [write_end])
                finally:
                    # Once sent, the server has its own copy: the report ends when
                    # every child has exec'd or exited and the server let go.
                    os.close(write_end)
                await _read_report(read_end, data)
            if bound.cancelled_caught:
                # A stuck server (stopped?): end it, so the report closes and the
                # children it may have started are known, killed and reaped.
                spawn_client.kill(sock)
                with trio.move_on_after(_DEADLINE):
                    await _read_report(read_end, data)
                for pid, _failure in _parse(data, len(batch)):
                    if pid is not None:
                        await _kill_and_reap(pid)
                timed_out: _Answer = (None, (errno.ETIMEDOUT, 4))
                for request in batch:
                    request.give(timed_out)
    finally:
        trio.lowlevel.notify_closing(read_end)
        os.close(read_end)
        # Whatever happened: every request answered once (none left: "the server ended").
        answers = _parse(data, len(batch))
        for request, answer in zip(batch, answers, strict=True):
            request.give(answer)


async def _submit(sock: socket.socket, request: _Request) -> None:
    """Have ``request`` sent to the server, alone or in a batch, and its answer given.

    The first request to find none pending waits one scheduling round, so
    that the other tasks starting children at the same moment add theirs, and
    then sends them all (up to a message's worth at a time): one message, one
    report pipe and one server wake-up for many children instead of one each.
    A full batch is sent at once by the task that filled it, so the server
    starts on it while the owner prepares the rest.
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
            return  # sent and answered by another task
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
    start = 0
    try:
        while start < len(queue):
            end, size = start, _BATCH_OVERHEAD
            while end < len(queue) and end - start < spawn_server.MAX_BATCH:
                if end > start and size + len(queue[end].msg) > _MAX_REQUEST:
                    break
                size += len(queue[end].msg) + _BATCH_OVERHEAD
                end += 1
            await _send_and_answer(sock, queue[start:end])
            start = end
    finally:
        for unsent in queue[start:]:
            unsent.give(_NO_ANSWER)


async def spawn(
    sock: socket.socket, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, fds: list[int]
) -> int | None:
    """Start ``argv`` through the server with ``fds`` (stdin, stdout, stderr) as its 0, 1 and 2; return its pid.

    ``None`` means "fork it yourself" (request too large).  Raises ``OSError``
    as ``subprocess`` would (``FileNotFoundError`` for a missing executable or
    ``cwd``), ``ETIMEDOUT`` for a server that did not answer within the hang
    guard (killed, so the next spawn starts another), ``ValueError`` for an
    embedded NUL.  The caller keeps ``fds`` (the server has its own copies).
    """
    if cwd is None:
        # The server's own directory is the owner's as it was at the server's start.
        with contextlib.suppress(OSError):
            cwd = os.getcwd()
    msg = _encode(argv, env, cwd)
    if len(msg) + _BATCH_OVERHEAD > _MAX_REQUEST:
        return None
    request = _Request(msg, fds)
    await _submit(sock, request)
    pid, failure = await request.wait()
    if failure is not None:
        code, stage = failure
        if stage == 4:
            raise OSError(errno.ETIMEDOUT, "the spawn server did not answer")
        if pid is not None:
            await _reap(pid)
        if stage == 3:
            raise OSError(code, os.strerror(code))
        raise OSError(code, os.strerror(code), cwd if stage == 1 else argv[0])
    if pid is None:
        # The server ended before the child reported (it was killed): the next spawn restarts it.
        spawn_client.kill(sock)
        raise OSError(errno.EIO, "the spawn server ended")
    return pid


async def _reap(pid: int) -> None:
    # The child exits right after reporting its failure; waiting on a pidfd keeps trio responsive.
    fd = os.pidfd_open(pid)
    try:
        with trio.CancelScope(shield=True), trio.move_on_after(_DEADLINE):
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
