"""Children die with their owner (PR_SET_PDEATHSIG), and only then: real owner processes, real children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from agentrt.lowlevel import DEATH_SIGNAL_SUPPORTED
from agentrt.testing._pids import PidWatch

pytestmark = pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="the death signal is Linux-only (prctl, pidfd)")

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
SLEEPER = (sys.executable, "-S", "-c", "import time\nwhile True: time.sleep(3600)")


def _owner(body: str) -> subprocess.Popen[str]:
    """A real owner process running ``body`` inside trio.run (``main`` is async)."""
    code = "import os, sys, threading, trio\n" + textwrap.dedent(body) + "\ntrio.run(main)\n"
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV
    )


def test_child_survives_when_the_trio_worker_threads_retire() -> None:
    # The death signal fires when the forking *thread* ends.  trio's cache
    # threads retire when idle (here after 10 ms): a child forked from one of
    # them would be killed then.  The child must still answer afterwards.
    owner = _owner(
        f"""
        import trio._core._thread_cache as cache
        cache.IDLE_TIMEOUT = 0.01
        from agentrt._process import ProcessSpec, open_process

        async def main():
            spec = ProcessSpec(argv=({sys.executable!r}, "-S", "-c",
                "import sys\\nfor line in sys.stdin: print(line.strip(), flush=True)"), env={{}})
            async with open_process(spec) as proc:
                await trio.to_thread.run_sync(lambda: None)  # a cache worker exists now
                for t in threading.enumerate():
                    if t.name.startswith("Trio thread"):
                        tid = t.native_id
                        t.join(30)
                        # join returns a moment before the OS thread is gone: wait for that too.
                        with trio.fail_after(30):
                            while os.path.exists(f"/proc/self/task/{{tid}}"):
                                await trio.sleep(0.01)
                await proc.send(b"ping\\n")
                with trio.fail_after(30):
                    reply = await proc.receive_some()
                print(reply.decode().strip(), "exited" if proc.exited.is_set() else "running", flush=True)
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.split() == ["ping", "running"]


def test_sigkill_of_the_owner_kills_its_child() -> None:
    owner = _owner(
        f"""
        from agentrt._process import ProcessSpec, open_process

        async def main():
            async with open_process(ProcessSpec(argv={SLEEPER!r}, env={{}})) as proc:
                print(proc.pid, flush=True)
                await trio.sleep_forever()
        """
    )
    assert owner.stdout is not None
    pid = int(owner.stdout.readline())
    with PidWatch(pid) as child:
        owner.kill()
        owner.wait(30)
        assert child.gone(30), "the child outlived its SIGKILLed owner"
    owner.stdout.close()
    owner.stdin.close()  # type: ignore[union-attr]


def test_owned_process_pipes_and_exit_code_through_the_public_api() -> None:
    owner = _owner(
        f"""
        import subprocess
        from agentrt.lowlevel import open_owned_process

        async def main():
            proc = await open_owned_process(
                [{sys.executable!r}, "-S", "-c",
                 "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)"],
                env={{}}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            data = b""
            while chunk := await proc.stdout.receive_some():
                data += chunk
            code = await proc.wait()
            print(sorted(data.decode().split()), code, proc.returncode, os.getpgid(0) != proc.pid)
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.strip() == "['err', 'out'] 7 7 True"


def test_owner_dead_before_prctl_means_the_child_kills_itself() -> None:
    # The race the getppid() check closes, forced: the function that runs in
    # the child is told a parent pid that is not its parent's.
    owner = _owner(
        f"""
        import subprocess
        from agentrt import _spawn

        async def main():
            popen = subprocess.Popen({SLEEPER!r}, preexec_fn=_spawn._die_with(os.getpid() + 1_000_000))
            print(popen.wait())
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.strip() == str(-signal.SIGKILL)
