"""The spawn server: a small process that starts its owner's children (run as a script, stdlib only).

Why it exists: setting the death signal needs code between ``fork`` and
``exec``, and forking the owner (a large, busy Python process) from Python
costs milliseconds with the GIL held.  This process is small and
single-threaded, so its ``fork`` is cheap; it forks with ``CLONE_PARENT``, so
every child is the *owner's* child, exactly as if the owner had forked it
(the owner waits for it, holds its pidfd, and its death signal follows the
owner's long-lived spawner thread that started this server).

Arguments: the descriptor number of a ``SOCK_SEQPACKET`` socket, and the
owner's pid.  Protocol, over that socket: this process says ``ready`` once;
then each message is ``marshal`` of one request ``(executables, argv, envp,
cwd)`` (bytes), or of a list of up to 84 such marshals (a batch: the owner
sends the requests pending at once in one message), carrying three descriptors
per request, in order (the child's stdin, stdout and stderr), and last the
write end of the message's one report pipe.  Records on the report pipe, each
tagged with the request's place in the message (``H``): the child writes
``C`` + place + its pid (native ``q``) first, and ``E`` + place + errno
(``i``) + stage (``B``: 0 exec, 1 chdir, 2 set-up) if it cannot exec; this
server writes ``E`` (stage 3) if it cannot fork.  Each record is one write of
a few bytes, so records never interleave.  The pipe reaches end of file once
every child of the message has exec'd (the end is close-on-exec) or exited,
and this server has closed its copy.

The child, before ``exec``: sets ``PR_SET_PDEATHSIG(SIGKILL)``, then checks
that its parent is still the owner (else no death signal would ever come, and
it kills itself), starts its own session, takes the three descriptors as 0, 1
and 2 and closes every other one.  Every ignored signal (Python's own, and any
the owner inherited, such as ``nohup``'s SIGHUP) is restored to its default and
the signal mask cleared once, in this process, so children start clean.  This
server dies with the owner (its own death signal) and ends at end of file on
its socket; it never runs a shell and passes the environment it is given,
nothing of its own.
"""

import _socket
import ctypes
import marshal
import os
import sys
from _struct import pack
from ctypes import get_errno
from os import _exit, chdir, closerange, dup2, execve, getpid, getppid, kill, setsid, write

# The C modules, not `socket` and `signal`: those wrappers import `enum` and
# grow this process's private memory by a fifth (4.4 to 3.5 MB), and every
# fork copies the page tables of that memory, which the child then drops at
# exec (see docs/dialects.md, Performance).  Nor `collections` or `typing`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from signal import SIGKILL
else:
    import _signal
    from _signal import SIGKILL

# (executables, argv, envp, cwd), as the owner's marshal sends it.
_Request = tuple[list[bytes], list[bytes], list[bytes], bytes | None]

_CLONE_PARENT = 0x00008000
_PR_SET_PDEATHSIG = 1
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
_FDS = 3
# SCM_RIGHTS carries at most 253 descriptors a message (the kernel's SCM_MAX_FD): three a request, one report.
MAX_BATCH = 84
_FD_BYTES = (_FDS * MAX_BATCH + 1) * 4
# Room for the owner's largest message (its spawn_client._MAX_REQUEST) and then some.
_MAX_MESSAGE = 1 << 17


def _child(
    owner: int,
    fds: list[int],
    report: int,
    place: bytes,
    request: _Request,
    env: dict[bytes, bytes],
    set_death_signal: "Callable[[], int]",
) -> None:
    # Whatever can be prepared is prepared by the server before the clone: every
    # page this child writes is a copy-on-write fault, and it dirties fewer the
    # less Python it runs (the descriptors arrive close-on-exec, the signals
    # Python ignores are already back to their defaults, the environment is
    # built; the functions are globals, not module attributes looked up here).
    stage = 2
    try:
        if set_death_signal() != 0:
            raise OSError(get_errno(), "prctl")
        if getppid() != owner:
            # The owner died before prctl took effect: no signal would ever come.
            kill(getpid(), SIGKILL)
        write(report, b"C" + place + pack("=q", getpid()))
        setsid()
        dup2(fds[0], 0)
        dup2(fds[1], 1)
        dup2(fds[2], 2)
        closerange(3, report)
        closerange(report + 1, 1 << 20)
        executables, argv, _envp, cwd = request
        if cwd is not None:
            stage = 1
            chdir(cwd)
        stage = 0
        failure: OSError | None = None
        for path in executables:
            try:
                execve(path, argv, env)
            except OSError as exc:
                # As the standard library does: a later candidate's ENOENT does not hide a real error.
                if failure is None or failure.errno in (2, 20):
                    failure = exc
        raise failure or OSError(2, "no executable")
    except OSError as exc:
        write(report, b"E" + place + pack("=iB", exc.errno or 5, stage))
    except BaseException:
        write(report, b"E" + place + pack("=iB", 5, stage))
    finally:
        _exit(127)


def _received_fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += memoryview(data)[:usable].cast("i").tolist()
    return fds


def main() -> None:
    owner = int(sys.argv[2])
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.restype = ctypes.c_int
    # The arguments converted once: the child makes the call with nothing to build.
    zero = ctypes.c_ulong(0)
    death_signal = (ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(SIGKILL), zero, zero, zero)

    def set_death_signal() -> int:
        result: int = prctl(*death_signal)
        return result

    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    clone_nr = ctypes.c_long(_SYS_CLONE[os.uname().machine])
    flags = ctypes.c_ulong(_CLONE_PARENT | _signal.SIGCHLD)
    # Children inherit these (exec keeps an ignored signal ignored, and the
    # mask): every signal ignored here, by Python (SIGPIPE, SIGXFSZ) or by
    # whatever started the owner (nohup's SIGHUP, a shell's SIGINT and SIGQUIT
    # for a background job), goes back to its default, and nothing stays
    # blocked.  For this process they change nothing that matters: it has no
    # terminal (its own session), only writes to a report pipe whose reader
    # waits for it and to the owner's socket, and it ends with the owner.
    for signum in range(1, _signal.NSIG):
        if _signal.getsignal(signum) == _signal.SIG_IGN:
            _signal.signal(signum, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
    sock = _socket.socket(fileno=int(sys.argv[1]))
    sock.sendall(b"ready")
    ancillary = _socket.CMSG_SPACE(_FD_BYTES)
    while True:
        try:
            # Close-on-exec as they arrive: the child keeps only what it dup2s to 0, 1 and 2.
            msg, ancdata, _flags, _addr = sock.recvmsg(_MAX_MESSAGE, ancillary, _socket.MSG_CMSG_CLOEXEC)
        except OSError:
            return
        fds = _received_fds(ancdata)
        if not msg and not fds:
            return  # the owner closed its end
        try:
            batch = marshal.loads(msg)
            batched = type(batch) is list
            requests = batch if batched else [batch]
            if len(fds) != _FDS * len(requests) + 1:
                continue  # malformed: every descriptor is closed below, so the report ends
            report = fds[-1]
            # Every request prepared before the first clone: between two clones this
            # process then writes to few pages, and each page it writes while a child
            # still shares it is a copy-on-write fault (in it or in the child).
            prepared: list[tuple[int, bytes, _Request, dict[bytes, bytes]] | None] = []
            for i, item in enumerate(requests):
                try:
                    request = marshal.loads(item) if batched else item
                    env = {key: value for key, _, value in (entry.partition(b"=") for entry in request[2])}
                    prepared.append((i, pack("=H", i), request, env))
                except Exception:  # a bad request must not end the server; it gets no record
                    prepared.append(None)
            for i, ready in enumerate(prepared):
                mine = fds[_FDS * i : _FDS * (i + 1)]
                try:
                    if ready is not None:
                        _, place, request, env = ready
                        # A raw clone: CLONE_PARENT makes the owner the parent (os.fork cannot).
                        # This process has one thread, so no lock can be held across it.
                        pid = syscall(clone_nr, flags, zero, zero, zero, zero)
                        if pid == 0:
                            _child(owner, mine, report, place, request, env, set_death_signal)
                        if pid < 0:
                            write(report, b"E" + place + pack("=iB", get_errno(), 3))
                except Exception:  # a failed clone must not end the server
                    pass
                finally:
                    # At once, not after the batch: the owner sees a child's output end when the child does.
                    for fd in mine:
                        os.close(fd)
                    fds[_FDS * i : _FDS * (i + 1)] = [-1] * _FDS
        except Exception:  # a bad message must not end the server; its descriptors close below
            pass
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)


if __name__ == "__main__":
    main()
