"""What the death-with-owner guarantee costs per child: the spawn server's fork against a ``vfork``.

Each contender runs in a fresh interpreter with the spawn server's own image
(``python -I -S``, the server module loaded as the server loads it), and
starts ``AGENTRT_BENCH_CHILDREN`` (default 1,000) children of ``/bin/true``
one after another, each in its own session with three ``/dev/null``
descriptors, each reaped before the next; interleaved round by round
(``AGENTRT_BENCH_ROUNDS``, default 5):

* ``vfork``: ``os.posix_spawn`` (glibc's ``clone(CLONE_VM|CLONE_VFORK)``):
  no code of ours between fork and exec, so no death signal (the baseline);
* ``fork_unguarded``: the server's ``clone`` and its child's code before
  ``exec``, less the guarantee (no ``prctl``, no ``getppid`` check);
* ``fork_guarded``: exactly what the server does for an owned child.

Per child: ``wall_us`` (spawn to reap), ``cpu_us`` (this process plus the
reaped children: the fork, the child's code, the exec, ``/bin/true``).
``fork_guarded`` against ``fork_unguarded`` is the price of the two calls
that make the guarantee; ``fork_unguarded`` against ``vfork`` the price of
needing code between fork and exec at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from ._rounds import Figures, interleave, load_text, print_summary, summarize

KEYS = ("wall_us", "cpu_us")
CONTENDERS = ("vfork", "fork_unguarded", "fork_guarded")

# Runs under `python -I -S`, stdlib only, after the server module's code: its globals are at hand.
_CHILD_SCRIPT = r"""
import resource, time
kind, n = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
prctl = libc.prctl
prctl.restype = ctypes.c_int
zero = ctypes.c_ulong(0)
death_signal = (ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(SIGKILL), zero, zero, zero)
guarded = lambda: prctl(*death_signal)
unguarded = lambda: 0
syscall = libc.syscall
syscall.restype = ctypes.c_long
clone_nr = ctypes.c_long(_SYS_CLONE[os.uname().machine])
flags = ctypes.c_ulong(_signal.SIGCHLD)
request = ([b"/bin/true"], [b"/bin/true"], [b"PATH=/usr/bin:/bin"], None)
env = {b"PATH": b"/usr/bin:/bin"}
me = os.getpid()

def usage():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

cpu0, t0 = usage(), time.perf_counter()
for _ in range(n):
    null = [os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC) for _ in range(3)]
    if kind == "vfork":
        actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(null)]
        pid = os.posix_spawn(b"/bin/true", [b"/bin/true"], env, file_actions=actions, setsid=True)
    else:
        read_end, write_end = os.pipe()
        fds = [*null, write_end]
        # The owner's pid the child checks is ours: we are its parent (no CLONE_PARENT here).
        pid = syscall(clone_nr, flags, zero, zero, zero, zero)
        if pid == 0:
            _child(me, fds, request, env, guarded if kind == "fork_guarded" else unguarded)
        os.close(write_end)
        while os.read(read_end, 64):  # until the exec (the report's end is close-on-exec)
            pass
        os.close(read_end)
    for fd in null:
        os.close(fd)
    os.waitpid(pid, 0)
elapsed, cpu = time.perf_counter() - t0, usage() - cpu0
# No json here: its imports (re, enum) would grow the image every fork copies.
print('{"wall_us": %f, "cpu_us": %f}' % (elapsed / n * 1e6, cpu / n * 1e6))
"""


def _one(server_file: str, kind: str, n: int) -> Figures:
    loader = (
        "import sys\n"
        f"path = {server_file!r}\n"
        "code = compile(open(path).read(), path, 'exec')\n"
        "server = {'__name__': 'spawn_server', '__file__': path}\n"
        "exec(code, server)\n"
        "globals().update((k, v) for k, v in server.items() if not k.startswith('__'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", loader + _CHILD_SCRIPT, kind, str(n)],
        capture_output=True, check=True, timeout=900, env={"LD_BIND_NOW": "1"},
    )
    figures: Figures = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return figures


def main() -> dict[str, Any]:
    import agentrt

    n = int(os.environ.get("AGENTRT_BENCH_CHILDREN", "1000"))
    rounds = int(os.environ.get("AGENTRT_BENCH_ROUNDS", "5"))
    print(f"owned_fork: {n} children of /bin/true per run, one at a time, {rounds} rounds; {load_text()}")
    # The spawn server is a stdlib-only script run by path (as the owner runs it): loaded the same way here.
    server_file = os.path.join(os.path.dirname(agentrt.__file__), "_os", "spawn_server.py")
    runs = interleave({kind: (lambda kind=kind: _one(server_file, kind, n)) for kind in CONTENDERS}, rounds)
    summary = summarize(runs, "vfork", KEYS)
    summary["children"] = n
    print_summary(f"the death signal's cost per child ({n} per run; ratios to vfork in the same rounds)", summary)
    return summary


if __name__ == "__main__":
    main()
