"""Bots and tasks on several hosts: network namespaces on this machine stand in for hosts.

Topology: a namespace ``R`` holds a bridge and the redis-server; hosts ``h1``..``h3`` reach it
through veth pairs (as does the test itself, through a fourth pair, to inspect Redis).  Each
host runs ``agentrt bots supervise --redis`` (nodes n1..n3) over the FastAgent fixture bot;
``h1`` and ``h2`` each run a control plane on the shared Redis (a control plane binds loopback
only, so its workers share its host): workers w1 on h1, w2 and w3 on h2.

The test kills n1 (SIGKILL), restarts it, partitions h2 (its link down), heals it, and proves:
every bot ends running on exactly one node and never on two at once (sampled from the
processes themselves); every task succeeds (none lost) and none runs twice on a worker that
was never cut off; the stale node's writes are refused.  Failover times are printed.
Namespaces and processes are removed even when the test fails.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError
from agentrt.lowlevel import AgentProcess, ProcessSpec, open_process

from .conftest import make_binary
from .redis_nodes import node_env, running, start_redis, stop

AGENTRT = str(Path(sys.executable).parent / "agentrt")
IP = shutil.which("ip") or "/usr/sbin/ip"
HANG = 90.0
TTL = 7.0
API_KEY = "netns-test-key-0123456789abcdef"


def _ip(*args: str) -> None:
    subprocess.run([IP, *args], check=True, capture_output=True, timeout=30)


def _namespaces_unavailable() -> str | None:
    if not sys.platform.startswith("linux") or not os.path.exists(IP):
        return "network namespaces need Linux and iproute2"
    if os.geteuid() != 0:
        return "creating network namespaces and veth pairs needs root (CAP_NET_ADMIN)"
    probe = f"agp{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"this kernel or container refuses network namespaces: {exc}"
    _ip("netns", "del", probe)
    return None


@attrs.frozen
class Net:
    redis_ns: str
    hosts: tuple[str, ...]
    links: tuple[str, ...]  # each host's bridge-side veth, in the redis namespace
    redis_ip: str


@pytest.fixture
def net() -> Iterator[Net]:
    """Three host namespaces bridged to a Redis namespace, plus a link for the test itself; always removed."""
    why = _namespaces_unavailable()
    if why:
        pytest.skip(why)
    tag = secrets.token_hex(3)
    rns = f"agr{tag}"
    hosts = tuple(f"agh{tag}{i}" for i in (1, 2, 3))
    prefix = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}."
    created: list[str] = []
    links: list[str] = []
    try:
        _ip("netns", "add", rns)
        created.append(rns)
        _ip("-n", rns, "link", "set", "lo", "up")
        _ip("-n", rns, "link", "add", "br0", "type", "bridge")
        _ip("-n", rns, "addr", "add", f"{prefix}1/24", "dev", "br0")
        _ip("-n", rns, "link", "set", "br0", "up")
        for i, ns in enumerate((*hosts, None), start=1):
            inner, outer = f"v{tag}{i}", f"p{tag}{i}"
            _ip("link", "add", inner, "type", "veth", "peer", "name", outer)
            _ip("link", "set", outer, "netns", rns)
            _ip("-n", rns, "link", "set", outer, "master", "br0", "up")
            if ns is None:  # the test's own leg, in this namespace
                _ip("addr", "add", f"{prefix}{10 + i}/24", "dev", inner)
                _ip("link", "set", inner, "up")
                created.append(f"link:{inner}")
                continue
            _ip("netns", "add", ns)
            created.append(ns)
            _ip("link", "set", inner, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{prefix}{10 + i}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            links.append(outer)
        yield Net(rns, hosts, tuple(links), f"{prefix}1")
    finally:
        for name in reversed(created):
            if name.startswith("link:"):
                subprocess.run([IP, "link", "del", name[5:]], capture_output=True, timeout=30)
            else:
                subprocess.run([IP, "netns", "del", name], capture_output=True, timeout=30)


def _in(ns: str, *argv: str) -> tuple[str, ...]:
    return (IP, "netns", "exec", ns, *argv)


async def _start(nursery: trio.Nursery, spec: ProcessSpec, ready: bool = False) -> tuple[AgentProcess, Any]:
    """Spawn; with ``ready``, return the child's first JSON line too; stdout is drained afterwards."""

    async def serve(task_status: trio.TaskStatus[tuple[AgentProcess, Any]]) -> None:
        async with open_process(spec) as proc:
            line: Any = None
            if ready:
                buf = b""
                with trio.fail_after(HANG):
                    while b"\n" not in buf:
                        chunk = await proc.receive_some()
                        assert chunk, proc.stderr_tail().decode()
                        buf += chunk
                line = json.loads(buf.split(b"\n", 1)[0])
            task_status.started((proc, line))
            while await proc.receive_some():  # never let a full pipe stall the child
                pass
            await proc.exited.wait()

    result: tuple[AgentProcess, Any] = await nursery.start(serve)
    return result


def _task_argv(runs: Path, name: str) -> list[str]:
    # Each run leaves <name>.<pid> holding its working directory (which names the worker).
    code = (
        "import os, sys, time; d, n = sys.argv[1], sys.argv[2]; "
        "open(os.path.join(d, n + '.' + str(os.getpid())), 'w').write(os.getcwd()); time.sleep(0.5)"
    )
    return ["python3", "-c", code, str(runs), name]


@pytest.mark.parametrize("rounds", [1, pytest.param(3, marks=pytest.mark.slow)])
async def test_bots_and_tasks_survive_a_killed_and_a_partitioned_host(net: Net, tmp_path: Path, rounds: int) -> None:
    from agentrt_fastagent._redis_store import RedisBotStore
    from agentrt_managed_task.api import open_store

    port = 6379
    redis_proc = start_redis(port, net.redis_ip, prefix=_in(net.redis_ns))
    url = f"redis://{net.redis_ip}:{port}/0"
    presence, runs = tmp_path / "presence", tmp_path / "runs"
    presence.mkdir()
    runs.mkdir()
    bots = [f"bot{i:02d}" for i in range(12)]
    node_of = {"n1": net.hosts[0], "n2": net.hosts[1], "n3": net.hosts[2]}
    envs = {
        n: node_env(tmp_path, n, make_binary(tmp_path / f"bin-{n}", "happy", step_delay_ms=1,
                                             presence_dir=str(presence), node=n), url)
        for n in node_of
    }  # fmt: skip
    store = RedisBotStore(url, command_timeout=5.0)
    tasks = await open_store(redis_url=url, prefix="netns:cp:")
    doubles: list[Any] = []
    timings: list[str] = []
    try:
        for bot in bots:
            await store.save_bot(BotRecord(bot_id=bot, desired_state="running", config={"profile": "main"}))
        async with trio.open_nursery() as nursery:

            async def sample() -> None:
                while True:
                    seen = running(presence)
                    if any(len(v) > 1 for v in seen.values()):
                        doubles.append(seen)
                    await trio.sleep(0.05)  # the sampling period

            nursery.start_soon(sample)

            async def node(name: str) -> AgentProcess:
                argv = _in(node_of[name], AGENTRT, "bots", "supervise", "--node", name, "--max-bots", "6",
                           "--lease-ttl", str(TTL))  # fmt: skip
                proc, _ = await _start(nursery, ProcessSpec(argv=argv, env=envs[name], stdin=False, term_grace=15))
                return proc

            cp_env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": "/nonexistent",
                      "AGENTRT_CONTROL_PLANE_API_KEY": API_KEY, "AWP_TASK_LEASE_SECONDS": "3"}  # fmt: skip
            cps = {}
            for host in net.hosts[:2]:
                argv = _in(host, AGENTRT, "control-plane", "--port", "0", "--redis", url, "--redis-prefix", "netns:cp:")
                _proc, ready = await _start(nursery, ProcessSpec(argv=argv, env=cp_env, stdin=False), ready=True)
                cps[host] = ready["url"]
            worker_env = {**cp_env, "AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN": "1", "AWP_CONTROL_PLANE_API_KEY": API_KEY}
            for wid, host in (("w1", net.hosts[0]), ("w2", net.hosts[1]), ("w3", net.hosts[1])):
                argv = _in(host, AGENTRT, "worker", "--control-plane", cps[host], "--allow", "python3", "--slots", "2",
                           "--poll-interval", "0.1", "--work-dir", str(tmp_path / wid), "--agent-id", wid,
                           "--trusted-path", os.environ["PATH"])  # fmt: skip
                await _start(nursery, ProcessSpec(argv=argv, env=worker_env, stdin=False), ready=True)
            procs = {n: await node(n) for n in node_of}

            async def until(cond: Any) -> dict[str, list[tuple[str, int]]]:
                with trio.fail_after(HANG):
                    while True:
                        seen = running(presence)
                        if cond(seen):
                            return seen
                        await trio.sleep(0.1)  # polling the processes' own files

            def once_on(among: set[str]) -> Any:
                return lambda s: set(s) == set(bots) and all(len(v) == 1 and v[0][0] in among for v in s.values())

            await until(once_on({"n1", "n2", "n3"}))
            submitted = []
            for r in range(rounds):
                for i in range(12):
                    row, _ = await tasks.submit("command", {"argv": _task_argv(runs, f"r{r}t{i}")}, None)
                    submitted.append(row.id)
                # A node dies: its bots move to the live nodes.
                t0 = trio.current_time()
                procs["n1"].send_signal(signal.SIGKILL)
                await until(once_on({"n2", "n3"}))
                timings.append(f"SIGKILL n1 -> its bots run elsewhere: {trio.current_time() - t0:.2f}s")
                procs["n1"] = await node("n1")
                # A host is cut off: its node stops its bots on its own, the others take them over.
                stale = {}
                link = await store.link()
                for bot, where in running(presence).items():
                    if where[0][0] == "n2":
                        node_name, token = await link.call(
                            lambda b=bot, c=link.client: c.hmget(f"{store.prefix}lease:{b}", ["node", "token"])
                        )
                        stale[bot] = (node_name.decode(), token.decode())
                t0 = trio.current_time()
                _ip("-n", net.redis_ns, "link", "set", net.links[1], "down")
                await until(once_on({"n1", "n3"}))
                timings.append(
                    f"h2 partitioned ({len(stale)} bots) -> they run elsewhere: {trio.current_time() - t0:.2f}s"
                )
                _ip("-n", net.redis_ns, "link", "set", net.links[1], "up")
                # The cut-off node's writes are refused: its leases' tokens are stale.
                for bot, (holder, token) in stale.items():
                    fenced = store.fenced("n2", lambda b, h=holder, t=token: (h, t))
                    with pytest.raises(AgentrtError) as refused:
                        await fenced.update_bot(bot, lambda rec: attrs.evolve(rec, status="stopped"))
                    assert refused.value.code == "fencing_refused"
            with trio.fail_after(HANG * rounds):
                while True:
                    rows = [await tasks.get(t) for t in submitted]
                    if all(r is not None and r.status in ("success", "failed") for r in rows):
                        break
                    await trio.sleep(0.2)  # polling the task store
            await until(once_on({"n1", "n2", "n3"}))
            nursery.cancel_scope.cancel()
        assert not doubles, doubles[:3]
        assert all(r is not None and r.status == "success" for r in rows), [r.public() for r in rows if r]
        by_task: dict[str, list[str]] = {}
        for entry in runs.iterdir():
            worker = next(p for p in Path(entry.read_text()).parts if p in ("w1", "w2", "w3"))
            by_task.setdefault(entry.name.rsplit(".", 1)[0], []).append(worker)
        assert len(by_task) == 12 * rounds  # none lost
        # w1 was never cut off or killed: it ran no task twice (a rerun is at-least-once after a cut).
        assert all(w.count("w1") <= 1 for w in by_task.values()), by_task
        print("\n" + "\n".join(timings), f"\ntask runs: {sum(map(len, by_task.values()))} for {len(by_task)} tasks")
    finally:
        with trio.CancelScope(shield=True):
            await store.aclose()
            await tasks.aclose()
        stop(redis_proc)
