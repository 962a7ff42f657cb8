"""Children die with their owner (PR_SET_PDEATHSIG), and only then: real owner processes, real children."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
import trio

from agentrt._os import spawn_batch as _spawn_batch
from agentrt._os import spawn_client as _spawn_client
from agentrt._os import spawn_server as _spawn_server
from agentrt.lowlevel import DEATH_SIGNAL_SUPPORTED, OwnedProcess, open_owned_process
from agentrt.testing._pids import PidWatch

pytestmark = pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="the death signal is Linux-only (prctl, pidfd)")

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
SLEEPER = (sys.executable, "-S", "-c", "import time\nwhile True: time.sleep(3600)")


@pytest.fixture(autouse=True)
def _servers_from_the_first_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    # A program forks its first few children itself; these tests mean the servers.
    monkeypatch.setattr(_spawn_client, "_SERVE_AFTER", 0)


def _owner(body: str, serve_after: int = 0) -> subprocess.Popen[str]:
    """A real owner process running ``body`` inside trio.run (``main`` is async)."""
    head = "import os, sys, threading, trio\nfrom agentrt._os import spawn_client as _sc\n"
    head += f"_sc._SERVE_AFTER = {serve_after}\n"
    code = head + textwrap.dedent(body) + "\ntrio.run(main)\n"
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


@pytest.mark.parametrize("path", ["server", "fork"])
def test_sigkill_of_the_owner_kills_its_child(path: str) -> None:
    # Both ways a child starts: through the spawn server, and forked here (the
    # fallback where no server can run).
    owner = _owner(
        f"""
        from agentrt._os import spawn_client as _spawn_client
        from agentrt._process import ProcessSpec, open_process
        _spawn_client._broken = {path == "fork"}

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
        from agentrt._os import spawn as _spawn

        async def main():
            popen = subprocess.Popen({SLEEPER!r}, preexec_fn=_spawn._die_with(os.getpid() + 1_000_000))
            print(popen.wait())
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.strip() == str(-signal.SIGKILL)


def _marked(token: str) -> list[int]:
    """Pids of live processes whose environment holds ``token`` (our children carry it)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if token.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_sigkill_of_the_owner_mid_burst_kills_every_child() -> None:
    # Killed while many spawns are in flight through the spawn servers: every
    # child, also one whose pid the owner never got to see, dies with it.
    token = f"AGENTRT_TEST_MARK={uuid.uuid4().hex}"
    key, value = token.split("=")
    sleep = shutil.which("sleep")
    owner = _owner(
        f"""
        import subprocess
        from agentrt.lowlevel import open_owned_process

        async def one():
            proc = await open_owned_process([{sleep!r}, "3600"], env={{{key!r}: {value!r}}})
            print(proc.pid, flush=True)
            await trio.sleep_forever()

        async def main():
            async with trio.open_nursery() as nursery:
                for _ in range(200):
                    nursery.start_soon(one)
        """
    )
    assert owner.stdout is not None
    first = int(owner.stdout.readline())
    with PidWatch(first) as child:
        owner.kill()
        owner.wait(30)
        assert child.gone(30)
    for _ in range(3):  # a clone in flight at the owner's death shows up late, and dies too
        for pid in _marked(token):
            with PidWatch(pid) as watch:
                assert watch.gone(30), f"child {pid} outlived its SIGKILLed owner"
    assert _marked(token) == []
    owner.stdout.close()
    owner.stdin.close()  # type: ignore[union-attr]


async def test_a_served_child_is_the_owners_own_in_its_own_session_with_default_signals() -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    proc = await open_owned_process([sleep, "3600"], env={})
    try:
        assert proc.pid not in _spawn_client.server_pids()
        with open(f"/proc/{proc.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        ppid, session = int(fields[1]), int(fields[3])
        assert ppid == os.getpid()  # CLONE_PARENT: ours, not the server's
        assert session == proc.pid
        with open(f"/proc/{proc.pid}/status") as handle:
            status = dict(line.split(":\t", 1) for line in handle.read().splitlines() if ":\t" in line)
        assert int(status["SigIgn"], 16) == 0  # Python's ignored SIGPIPE is not inherited
        with open(f"/proc/{proc.pid}/environ", "rb") as handle:
            assert handle.read() == b""  # exactly the given environment
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        with trio.fail_after(30):
            assert await proc.wait() == -signal.SIGKILL


async def test_a_killed_spawn_server_is_replaced_and_its_children_live_on() -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    first = await open_owned_process([sleep, "3600"], env={})
    servers = list(_spawn_client._servers.values())
    assert servers
    for _sock, popen in servers:
        popen.kill()
        popen.wait(30)
    assert first.returncode is None  # our child, not the server's: unaffected
    later = [await open_owned_process([sleep, "3600"], env={}) for _ in range(2 * _spawn_client._SERVERS)]
    assert all(p.returncode is None for p in later)
    assert not set(_spawn_client.server_pids()) & {popen.pid for _sock, popen in servers}
    for proc in [first, *later]:
        os.kill(proc.pid, signal.SIGKILL)
        with trio.fail_after(30):
            await proc.wait()


async def test_spawn_errors_read_as_subprocess_would() -> None:
    with pytest.raises(FileNotFoundError) as missing:
        await open_owned_process(["/nonexistent-dir/agent"], env={})
    assert missing.value.filename == "/nonexistent-dir/agent"
    with pytest.raises(FileNotFoundError) as no_cwd:
        await open_owned_process(["/bin/true"], env={}, cwd="/nonexistent-dir")
    assert no_cwd.value.filename == "/nonexistent-dir"
    with pytest.raises(ValueError):
        await open_owned_process(["/bin/true", "a\0b"], env={})
    with pytest.raises(ValueError):
        await open_owned_process(["/bin/true"], env={"A=B": "1"})


async def test_a_request_too_large_for_the_server_is_forked_here() -> None:
    proc = await open_owned_process(["/bin/true"], env={"BIG": "x" * (_spawn_batch._MAX_REQUEST + 1)})
    with trio.fail_after(30):
        assert await proc.wait() == 0
    assert proc._popen is not None  # type: ignore[attr-defined]


def test_a_server_child_whose_parent_is_not_the_owner_kills_itself() -> None:
    # The race the getppid() check closes in the server's child, forced: the
    # server is told an owner pid that is not its parent's.
    owner = _owner(
        f"""
        import marshal, socket, struct, subprocess

        async def main():
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            server = subprocess.Popen(
                [sys.executable, "-I", "-S", {_spawn_server.__file__!r},
                 str(theirs.fileno()), str(os.getpid() + 1_000_000)],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
            theirs.close()
            assert ours.recv(16) == b"ready"
            read_end, write_end = os.pipe()
            request = marshal.dumps(([b"/bin/true"], [b"/bin/true"], [], None))
            socket.send_fds(ours, [request], [0, 1, 2, write_end])
            os.close(write_end)
            report = b""
            while chunk := os.read(read_end, 64):
                report += chunk
            ours.close()
            server.wait(30)
            pid, status = os.wait()
            print(report, os.waitstatus_to_exitcode(status))
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.strip() == f"b'' {-signal.SIGKILL}"


def test_a_stopped_spawn_server_is_a_bounded_error_and_is_replaced() -> None:
    # A server that never answers (SIGSTOPped): the spawn fails with ETIMEDOUT
    # after the bound instead of hanging, the server is killed, and the next
    # spawn goes to a fresh one.
    owner = _owner(
        """
        import errno, signal
        from agentrt._os import spawn_batch as _spawn_batch
        from agentrt._os import spawn_client as _spawn_client
        from agentrt.lowlevel import open_owned_process
        _spawn_client._SERVERS = 1

        async def main():
            first = await open_owned_process(["/bin/true"], env={})
            await first.wait()
            (_sock, popen), = _spawn_client._servers.values()
            os.kill(popen.pid, signal.SIGSTOP)
            _spawn_batch._DEADLINE = 0.5  # only this spawn: its server surely never answers
            try:
                await open_owned_process(["/bin/true"], env={})
            except OSError as exc:
                print("timeout" if exc.errno == errno.ETIMEDOUT else exc)
            popen.wait(30)
            _spawn_batch._DEADLINE = 60.0
            again = await open_owned_process(["/bin/true"], env={})
            print(await again.wait(), popen.pid not in _spawn_client.server_pids())
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.split() == ["timeout", "0", "True"]


def test_a_child_starts_in_the_owners_current_directory(tmp_path: pathlib.Path) -> None:
    # The spawn servers started earlier, elsewhere: a child still starts where the owner is now.
    owner = _owner(
        f"""
        import subprocess
        from agentrt._os import spawn_client as _spawn_client
        from agentrt.lowlevel import open_owned_process

        async def main():
            for _ in range(_spawn_client._SERVERS):  # every server started before the chdir
                first = await open_owned_process(["/bin/true"], env={{}})
                await first.wait()
            os.chdir({str(tmp_path)!r})
            for _ in range(_spawn_client._SERVERS):
                proc = await open_owned_process(["/bin/pwd"], env={{}}, stdout=subprocess.PIPE)
                data = b""
                while chunk := await proc.stdout.receive_some():
                    data += chunk
                await proc.wait()
                print(data.decode().strip())
        """
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.split() == [str(tmp_path)] * _spawn_client._SERVERS


def test_a_program_that_starts_a_few_children_runs_no_spawn_server() -> None:
    # One `agentrt run` starts one child: it forks it itself and pays for no
    # server; a program that goes on starting children gets the servers.
    owner = _owner(
        """
        from agentrt.lowlevel import open_owned_process

        async def main():
            procs = []
            for _ in range(_sc._SERVE_AFTER):
                procs.append(await open_owned_process(["/bin/true"], env={}))
            print(len(_sc.server_pids()), flush=True)
            procs.append(await open_owned_process(["/bin/true"], env={}))
            print(len(_sc.server_pids()), flush=True)
            for proc in procs:
                assert await proc.wait() == 0
        """,
        serve_after=8,
    )
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert out.split() == ["0", "1"]


def test_many_spawns_at_once_start_each_server_once() -> None:
    # Spawns that find a server not started yet wait for the one start under way
    # instead of each queueing a spawner-thread hop that only finds it running.
    owner = _owner(
        """
        from agentrt.lowlevel import open_owned_process

        starts = []
        ensure = _sc.ensure

        def counting(index, start):
            starts.append(index)
            return ensure(index, start)

        _sc.ensure = counting

        async def main():
            procs = []

            async def one():
                procs.append(await open_owned_process(["/bin/true"], env={}))

            async with trio.open_nursery() as nursery:
                for _ in range(40):
                    nursery.start_soon(one)
            for proc in procs:
                assert await proc.wait() == 0
            print(len(procs), len(starts), len(_sc.server_pids()), flush=True)
        """
    )
    out, _ = owner.communicate(timeout=120)
    assert owner.returncode == 0
    servers = str(_spawn_client._SERVERS)
    assert out.split() == ["40", servers, servers]


async def test_the_spawn_server_is_small_and_has_only_its_own_environment() -> None:
    # Every fork copies the server's page tables: it loads no `socket`/`signal`
    # wrappers (they import `enum`), no `collections` or `typing`; and it binds
    # its symbols at start, so children do not.
    loader = (
        "import sys\n"
        f"path = {_spawn_server.__file__!r}\n"
        "exec(compile(open(path).read(), path, 'exec'), {'__name__': 'server'})\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", loader], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "ctypes" in loaded  # the script was run
    assert not loaded & {"socket", "signal", "enum", "collections", "typing", "functools", "re"}
    proc = await open_owned_process(["/bin/true"], env={})
    with trio.fail_after(30):
        assert await proc.wait() == 0
    pids = _spawn_client.server_pids()
    assert pids
    for pid in pids:
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f.read() == b"LD_BIND_NOW=1\0"


def _signal_status(text: str) -> dict[str, int]:
    fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
    return {key: int(fields[key], 16) for key in ("SigIgn", "SigBlk")}


@pytest.mark.parametrize("serve_after", [0, 1000], ids=["through-the-server", "forked-here"])
def test_a_child_starts_clean_whatever_signals_its_owner_inherited(serve_after: int) -> None:
    """An owner run under nohup or as a background job: its agents ignore and block nothing."""
    owner = textwrap.dedent(
        f"""
        import os, subprocess, trio
        from agentrt._os import spawn_client as _sc
        from agentrt.lowlevel import open_owned_process
        _sc._SERVE_AFTER = {serve_after}

        async def main():
            print(open("/proc/self/status").read().replace("\\n", "|"), flush=True)
            for _ in range(2):  # through each path more than once (each server, when served)
                proc = await open_owned_process(["/bin/cat", "/proc/self/status"], env={{}}, stdout=subprocess.PIPE)
                data = b""
                while chunk := await proc.stdout.receive_some():
                    data += chunk
                assert await proc.wait() == 0
                print(data.decode().replace("\\n", "|"), flush=True)

        trio.run(main)
        """
    )
    # The owner starts as nohup and a shell's background job leave it: SIGHUP,
    # SIGINT and SIGQUIT ignored, and (as some launchers do) signals blocked.
    launcher = (
        "import os, signal, sys\n"
        "for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT): signal.signal(s, signal.SIG_IGN)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM, signal.SIGCHLD})\n"
        "os.execv(sys.executable, [sys.executable, '-c', sys.argv[1]])\n"
    )
    proc = subprocess.run([sys.executable, "-c", launcher, owner], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    own, *children = (_signal_status(line.replace("|", "\n")) for line in proc.stdout.splitlines())
    hup_int_quit = (1 << (signal.SIGHUP - 1)) | (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGQUIT - 1))
    assert own["SigIgn"] & hup_int_quit == hup_int_quit  # the owner really inherited them
    assert own["SigBlk"] & (1 << (signal.SIGUSR1 - 1))
    assert len(children) == 2
    assert children == [{"SigIgn": 0, "SigBlk": 0}] * 2


async def test_spawns_pending_at_once_go_to_the_server_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Many children asked for at the same moment cost a few messages and a few
    # report pipes (one a message), not one each; every child still gets its
    # own request (argv, exit code, error) and only its own three descriptors.
    import socket

    warm = await open_owned_process(["/bin/true"], env={})
    with trio.fail_after(30):
        assert await warm.wait() == 0
    messages: list[int] = []
    send_fds = socket.send_fds
    reports: list[int] = []
    pipe2 = os.pipe2

    def counting(sock: socket.socket, buffers: list[bytes], fds: list[int], *args: object) -> int:
        sent = send_fds(sock, buffers, fds, *args)
        messages.append(len(fds))
        return sent

    def counting_pipes(flags: int) -> tuple[int, int]:
        reports.append(flags)
        return pipe2(flags)

    monkeypatch.setattr(socket, "send_fds", counting)
    monkeypatch.setattr(os, "pipe2", counting_pipes)
    n = 100
    procs: dict[int, OwnedProcess] = {}
    missing: list[BaseException] = []

    async def one(i: int) -> None:
        procs[i] = await open_owned_process(["/bin/sh", "-c", f"read _; exit {i}"], env={}, stdin=subprocess.PIPE)

    async def absent() -> None:
        try:
            await open_owned_process(["/nonexistent-dir/agent"], env={})
        except FileNotFoundError as exc:
            missing.append(exc)

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(one, i)
        nursery.start_soon(absent)
    assert len(missing) == 1
    # Three descriptors a request, every request sent once, and one report pipe a message.
    assert sum(messages) == 3 * (n + 1) + len(messages)
    assert len(messages) < n // 4
    assert len(reports) == len(messages)
    for i, proc in procs.items():
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{proc.pid}/fd")) == [0, 1, 2]
        assert proc.stdin is not None
        await proc.stdin.aclose()
        with trio.fail_after(30):
            assert await proc.wait() == i


async def test_a_spawn_waiting_for_its_batch_is_not_cancelled_and_its_child_is_returned() -> None:
    # A caller cancelled while its request waits in a batch still gets its
    # child (as trio's own spawn: a child started after its caller left would
    # have no owner), and so does every other request of the batch.
    # Past the forked first few, and every server started, so no wait remains but the batch's.
    warm = [await open_owned_process(["/bin/true"], env={}) for _ in range(_spawn_client._SERVE_AFTER + 2)]
    assert len(_spawn_client.server_pids()) == _spawn_client._SERVERS
    for proc in warm:
        with trio.fail_after(30):
            await proc.wait()
    got: list[OwnedProcess] = []

    async def one(scope: trio.CancelScope) -> None:
        with scope:
            proc = await open_owned_process(["/bin/true"], env={})
            got.append(proc)
            scope.cancel()  # the cancel arrives only once the spawn is done

    scopes = [trio.CancelScope() for _ in range(20)]
    async with trio.open_nursery() as nursery:
        for scope in scopes:
            nursery.start_soon(one, scope)
        await trio.testing.wait_all_tasks_blocked()  # every request sent or waiting for its batch
        for scope in scopes:
            scope.cancel()
    assert len(got) == 20
    for proc in got:
        assert proc.pid not in _spawn_client.server_pids()
        with trio.fail_after(30):
            assert await proc.wait() == 0


def test_a_bad_request_in_a_batch_spoils_only_its_own_report() -> None:
    # The server, driven by hand: a batch of three requests whose middle one is
    # not a request, sharing one report pipe; the other two children start
    # (ours, through CLONE_PARENT) and report under their places, the middle
    # one gets no record, and the server keeps serving.
    import marshal
    import socket
    import struct

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = subprocess.Popen(
        [sys.executable, "-I", "-S", _spawn_server.__file__, str(theirs.fileno()), str(os.getpid())],
        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
    )
    theirs.close()
    try:
        ours.settimeout(30)
        assert ours.recv(16) == b"ready"
        good = marshal.dumps(([b"/bin/true"], [b"/bin/true"], [], None))
        missing = marshal.dumps(([b"/nonexistent-dir/agent"], [b"agent"], [], None))
        for batch, expected in (([good, b"not a request", good], {0: None, 2: None}), ([missing], {0: 2})):
            read_end, write_end = os.pipe()
            socket.send_fds(ours, [marshal.dumps(batch)], [0, 1, 2] * len(batch) + [write_end])
            os.close(write_end)
            report = b""
            while chunk := os.read(read_end, 64):
                report += chunk
            os.close(read_end)
            started: dict[int, int | None] = {}
            while report:
                if report[:1] == b"C":
                    place, pid = struct.unpack_from("=Hq", report, 1)
                    started[place] = None
                    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                    assert code == (0 if expected[place] is None else 127)
                    report = report[11:]
                else:
                    assert report[:1] == b"E"
                    place, errno_, stage = struct.unpack_from("=HiB", report, 1)
                    assert stage == 0
                    started[place] = errno_
                    report = report[8:]
            assert started == expected
        assert server.poll() is None
    finally:
        ours.close()
        server.wait(30)


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


async def test_the_spawn_server_writes_few_pages_between_two_clones() -> None:
    # After each clone every page of the server is shared with the child until
    # its exec, so each page the server writes before the next clone is a
    # copy-on-write fault: a count, not a time, so load does not blur it.  The
    # server prepares a whole batch (loads, environments) before its first
    # clone: about 34 faults a child here, against 49 when it prepared each
    # request between two clones.
    warm = [await open_owned_process(["/bin/true"], env={}) for _ in range(_spawn_client._SERVE_AFTER + 2)]
    for proc in warm:
        with trio.fail_after(30):
            await proc.wait()
    servers = _spawn_client.server_pids()
    assert len(servers) == _spawn_client._SERVERS
    before = sum(_minor_faults(pid) for pid in servers)
    procs: list[OwnedProcess] = []

    async def one() -> None:
        procs.append(await open_owned_process(["/bin/true"], env={}))

    n = 400
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)
    per_child = (sum(_minor_faults(pid) for pid in servers) - before) / n
    for proc in procs:
        with trio.fail_after(30):
            assert await proc.wait() == 0
    assert 0 < per_child < 42, per_child
