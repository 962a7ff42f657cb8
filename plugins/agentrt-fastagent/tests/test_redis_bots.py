"""Bots shared by several supervisors through Redis: the store, leases, fencing, failover.

Everything runs on a real redis-server (private, on loopback) and, for failover, real
``agentrt bots supervise --redis`` processes over the FastAgent fixture bot.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest
import trio

from agentrt.bots import AtomicBotStore, BotRecord
from agentrt.errors import AgentrtError
from agentrt.lowlevel import ProcessSpec, open_process
from agentrt_fastagent._lease import LeaseConfig, LeaseKeeper, open_shared_supervisor
from agentrt_fastagent._redis_store import RedisBotStore
from agentrt_fastagent._supervisor import SupervisorConfig, open_supervisor

from .conftest import PROFILE, Recorder, make_binary, resolver
from .redis_nodes import node_env, running, start_redis, stop

AGENTRT = str(Path(sys.executable).parent / "agentrt")
HANG = 60.0  # hang guard of every wait


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def redis_server() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A private redis-server per test (some tests freeze it)."""
    port = _port()
    proc = start_redis(port)
    try:
        yield proc, f"redis://127.0.0.1:{port}/0"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        stop(proc)


@pytest.fixture
async def store(redis_server: tuple[subprocess.Popen[bytes], str]) -> AsyncIterator[RedisBotStore]:
    s = RedisBotStore(redis_server[1], command_timeout=2.0)
    try:
        yield s
    finally:
        with trio.CancelScope(shield=True):
            await s.aclose()


async def test_store_round_trip_and_atomic_updates(store: RedisBotStore) -> None:
    assert isinstance(store, AtomicBotStore)
    await store.save_bot(BotRecord(bot_id="b2", config={"profile": "main"}))
    await store.save_bot(BotRecord(bot_id="b1", desired_state="running"))
    assert [r.bot_id for r in await store.list_bots()] == ["b1", "b2"]
    got = await store.get_bot("b2")
    assert got is not None and got.config == {"profile": "main"} and got.updated_at is not None
    assert await store.get_bot("nope") is None
    assert await store.update_bot("nope", lambda r: r) is None

    # Concurrent read-modify-writes from many tasks: none is lost (compare-and-set).
    def bump(r: BotRecord) -> BotRecord:
        return attrs.evolve(r, restart_count=r.restart_count + 1)

    async with trio.open_nursery() as n:
        for _ in range(20):
            n.start_soon(store.update_bot, "b1", bump)
    b1 = await store.get_bot("b1")
    assert b1 is not None and b1.restart_count == 20

    for i in range(5):
        await store.append_timeline("b1", {"type": "running", "message": f"m{i}", "payload": {}})
    page = await store.timeline("b1", offset=1, limit=2)
    assert [e["message"] for e in page] == ["m1", "m2"]
    await store.delete_bot("b1")
    assert await store.get_bot("b1") is None and await store.timeline("b1") == []
    with pytest.raises(AgentrtError) as bad:
        await store.get_bot("../evil")
    assert bad.value.code == "invalid_bot_id"


async def test_fencing_refuses_a_stale_nodes_writes(store: RedisBotStore) -> None:
    await store.save_bot(BotRecord(bot_id="b1", desired_state="running"))
    a = LeaseKeeper(store, LeaseConfig(node="a", ttl=30, stop_budget=4))
    b = LeaseKeeper(store, LeaseConfig(node="b", ttl=30, stop_budget=4))
    await a.tick()
    await b.tick()
    assert set(a.held) == {"b1"} and not b.held  # at most one holder
    fa, fb = store.fenced("a", a.fence), store.fenced("b", b.fence)
    await fa.update_bot("b1", lambda r: attrs.evolve(r, status="running", pid=4321))
    await fa.append_timeline("b1", {"type": "running", "message": "a", "payload": {}})
    # b has no lease: its writes of the runner's fields are refused.
    with pytest.raises(AgentrtError) as refused:
        await fb.update_bot("b1", lambda r: attrs.evolve(r, status="stopped"))
    assert refused.value.code == "fencing_refused"
    # a pid another node recorded is never shown to this node (it belongs to another host) ...
    seen_by_b = await fb.get_bot("b1")
    assert seen_by_b is not None and seen_by_b.pid is None and seen_by_b.status == "running"
    # ... and a user change made through b keeps it.
    await fb.update_bot("b1", lambda r: attrs.evolve(r, config={"profile": "x"}))
    raw = await store.get_bot("b1")
    assert raw is not None and raw.pid == 4321 and raw.config == {"profile": "x"}
    # A user may not write the runner's fields of a leased bot either; the desired state, always.
    with pytest.raises(AgentrtError) as refused:
        await store.update_bot("b1", lambda r: attrs.evolve(r, status="failed"))
    assert refused.value.code == "fencing_refused"

    # a's lease runs out (as if partitioned); b claims the bot with a larger token.
    link = await store.link()
    await link.call(lambda: link.client.delete([f"{store.prefix}lease:b1"]))
    token_a = int(a.held["b1"].token)
    await b.tick()
    assert set(b.held) == {"b1"} and int(b.held["b1"].token) > token_a
    for write in (
        fa.update_bot("b1", lambda r: attrs.evolve(r, status="stopped")),
        fa.save_bot(attrs.evolve(raw, status="stopping")),
        fa.append_timeline("b1", {"type": "stopped", "message": "stale", "payload": {}}),
    ):
        with pytest.raises(AgentrtError) as refused:
            await write
        assert refused.value.code == "fencing_refused"
    await fb.update_bot("b1", lambda r: attrs.evolve(r, status="starting"))
    await a.tick()  # the renewal tells a it lost the lease
    assert not a.held and set(b.held) == {"b1"}
    assert [e["message"] for e in await store.timeline("b1")] == ["a"]
    await store.update_bot("b1", lambda r: attrs.evolve(r, desired_state="stopped"))
    await b.tick()  # nobody wants it running and it runs nowhere here: released
    assert not b.held
    assert await link.call(lambda: link.client.exists([f"{store.prefix}lease:b1"])) == 0


async def test_placement_is_bounded_and_shared(store: RedisBotStore) -> None:
    for i in range(6):
        await store.save_bot(BotRecord(bot_id=f"b{i}", desired_state="running"))
    await store.save_bot(BotRecord(bot_id="off"))
    await store.save_bot(BotRecord(bot_id="broken", desired_state="running", status="failed"))
    a = LeaseKeeper(store, LeaseConfig(node="a", ttl=30, stop_budget=4, max_bots=2))
    b = LeaseKeeper(store, LeaseConfig(node="b", ttl=30, stop_budget=4))
    c = LeaseKeeper(store, LeaseConfig(node="c", ttl=30, stop_budget=4))
    for k in (a, b, c):
        await k._renew()  # every node's heartbeat first: each then claims its share
    for k in (a, b, c):
        await k.tick()
    assert len(a.held) == 2 and len(b.held) == 2 and len(c.held) == 2
    assert set(a.held) | set(b.held) | set(c.held) == {f"b{i}" for i in range(6)}


async def test_a_shared_store_runs_bots_only_under_leases(store: RedisBotStore, tmp_path: Path) -> None:
    # A supervisor without placement (the web UI's, an embedder's) would run every bot of every host.
    with pytest.raises(AgentrtError) as bad:
        async with open_supervisor(store, config=SupervisorConfig(instances_dir=tmp_path), resolve=resolver()):
            pass
    assert bad.value.code == "placement_required"


def test_lease_settings_are_checked() -> None:
    for kw, code in (
        ({"node": "n", "ttl": 5, "stop_budget": 4}, "lease_ttl_too_short"),
        ({"node": "a#b"}, "invalid_node_name"),
        ({"node": ""}, "invalid_node_name"),
        ({"node": "n", "ttl": float("nan")}, "invalid_lease_ttl"),
        ({"node": "n", "max_bots": -1}, "invalid_max_bots"),
    ):
        with pytest.raises(AgentrtError) as bad:
            LeaseConfig(**kw)  # type: ignore[arg-type]
        assert bad.value.code == code


def test_supervise_options_need_redis(tmp_path: Path) -> None:
    env = node_env(tmp_path, "n1", tmp_path / "none", "redis://127.0.0.1:1/0")
    del env["AGENTRT_BOTS_REDIS_URL"]
    out = subprocess.run([AGENTRT, "bots", "supervise", "--node", "n1"], env=env, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 2 and "redis_required" in out.stderr
    out = subprocess.run([AGENTRT, "bots", "supervise", "--redis", "redis://127.0.0.1:1/0", "--lease-ttl", "2"],
                         env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "lease_ttl_too_short" in out.stderr
    out = subprocess.run([AGENTRT, "bots", "list"], env={**env, "AGENTRT_BOTS_REDIS_URL": "redis://127.0.0.1:1/0"},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "redis_unavailable" in out.stderr and "127.0.0.1:1" not in out.stderr


async def test_partitioned_node_stops_its_bot_before_the_lease_can_expire(
    redis_server: tuple[subprocess.Popen[bytes], str], store: RedisBotStore, tmp_path: Path
) -> None:
    redis_proc, _url = redis_server
    presence = tmp_path / "presence"
    presence.mkdir()
    binary = make_binary(tmp_path / "bin", "happy", step_delay_ms=1, presence_dir=str(presence), node="a")
    await store.save_bot(BotRecord(bot_id="b1", desired_state="running"))
    recorder = Recorder()
    cfg = SupervisorConfig(
        instances_dir=tmp_path / "instances", backoff=(0.1,), reconcile_interval=0.1, term_grace=1.0,
        binary=binary, parent_env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )  # fmt: skip
    node_store = RedisBotStore(store.url, command_timeout=1.0)
    lease = LeaseConfig(node="a", ttl=7.5, stop_budget=cfg.term_grace + cfg.exit_grace + 1)
    async with open_shared_supervisor(node_store, lease, config=cfg, resolve=resolver(PROFILE), sinks=[recorder]) as (
        sup,
        keeper,
    ):
        with trio.fail_after(HANG):
            await recorder.wait_state("b1", "running")
        first_pid = sup.live_pid("b1")
        assert running(presence) == {"b1": [("a", first_pid)]}
        old_token = keeper.held["b1"].token
        os.kill(redis_proc.pid, signal.SIGSTOP)  # the node can no longer reach Redis
        try:
            with trio.fail_after(HANG):
                while running(presence):
                    await trio.sleep(0.05)  # polling the process table: noticed at most this late
            stopped_at = trio.current_time()
            assert "b1" in keeper.lost and not keeper.may_run("b1")
            # The server's lease lasts at least `ttl` from the last renewal the node saw acknowledged.
            assert stopped_at < keeper.lost["b1"] + lease.ttl
        finally:
            os.kill(redis_proc.pid, signal.SIGCONT)
        # Healed: once the old lease has expired on the server the bot is claimed again (here by
        # the same node, with a new token) and runs once more; the old token's writes are refused.
        with trio.fail_after(HANG):
            while "b1" not in keeper.held:
                await trio.sleep(0.05)  # polling the node's leases
        assert int(keeper.held["b1"].token) > int(old_token)
        stale = store.fenced("a", lambda bot: (keeper.holder, old_token))
        with pytest.raises(AgentrtError) as refused:
            await stale.update_bot("b1", lambda r: attrs.evolve(r, status="stopped", last_error_code="STALE"))
        assert refused.value.code == "fencing_refused"
        with trio.fail_after(HANG):
            while not running(presence):
                await trio.sleep(0.05)
        assert running(presence)["b1"][0][1] != first_pid
    await node_store.aclose()


async def test_three_nodes_share_bots_and_take_over_a_killed_one(
    redis_server: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    _proc, url = redis_server
    presence = tmp_path / "presence"
    presence.mkdir()
    bots = [f"bot{i}" for i in range(6)]
    envs = {}
    for name in ("n1", "n2", "n3"):
        binary = make_binary(tmp_path / f"bin-{name}", "happy", step_delay_ms=1, presence_dir=str(presence), node=name)
        envs[name] = node_env(tmp_path, name, binary, url)
    user_env = envs["n1"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([AGENTRT, "bots", *args], env=user_env, capture_output=True, text=True, timeout=60)

    for bot in bots:
        out = await trio.to_thread.run_sync(lambda b=bot: cli("add", b, "--profile", "main", "--start"))
        assert out.returncode == 0, out.stderr
    doubles: list[dict[str, list[tuple[str, int]]]] = []

    async def sample() -> None:
        while True:
            seen = running(presence)
            if any(len(v) > 1 for v in seen.values()):
                doubles.append(seen)
            await trio.sleep(0.05)  # a sampling period

    async def until(cond, what: str) -> dict[str, list[tuple[str, int]]]:  # type: ignore[no-untyped-def]
        with trio.fail_after(HANG):
            while True:
                seen = running(presence)
                if cond(seen):
                    return seen
                await trio.sleep(0.1)  # polling files the bots write

    def all_once(seen: dict[str, list[tuple[str, int]]], among: set[str]) -> bool:
        return set(seen) == set(bots) and all(len(v) == 1 and v[0][0] in among for v in seen.values())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample)
        procs = {}
        for name in ("n1", "n2", "n3"):
            argv = (AGENTRT, "bots", "supervise", "--node", name, "--max-bots", "4", "--lease-ttl", "7")
            procs[name] = await nursery.start(
                _serve, ProcessSpec(argv=argv, env=envs[name], stdin=False, term_grace=15)
            )
        seen = await until(lambda s: all_once(s, {"n1", "n2", "n3"}), "all bots running")
        per_node = {n: sum(1 for v in seen.values() if v[0][0] == n) for n in ("n1", "n2", "n3")}
        assert max(per_node.values()) <= 4, per_node
        victim = max(per_node, key=lambda n: per_node[n])  # the node holding the most bots
        survivors = {"n1", "n2", "n3"} - {victim}
        killed_at = trio.current_time()
        procs[victim].send_signal(signal.SIGKILL)
        await until(lambda s: all_once(s, survivors), "bots moved off the killed node")
        print(
            f"\nfailover after SIGKILL of a node holding {per_node[victim]} bot(s): "
            f"{trio.current_time() - killed_at:.2f}s (lease TTL 7s)"
        )
        listed = [
            json.loads(x) for x in (await trio.to_thread.run_sync(lambda: cli("list", "--json"))).stdout.splitlines()
        ]
        assert {r["bot_id"] for r in listed} == set(bots)
        # A user's stop from any host reaches the node that runs the bot.
        out = await trio.to_thread.run_sync(lambda: cli("stop", "bot0"))
        assert out.returncode == 0
        await until(lambda s: "bot0" not in s, "bot0 stopped")
        logs = await trio.to_thread.run_sync(lambda: cli("logs", "bot0", "--json"))
        kinds = [json.loads(x)["type"] for x in logs.stdout.splitlines()]
        assert "running" in kinds and kinds[-1] == "stopped", kinds
        for name in sorted(survivors):
            procs[name].send_signal(signal.SIGTERM)
        for name in sorted(survivors):
            with trio.fail_after(HANG):  # its own bounded shutdown (a second signal could cut it short)
                status = await procs[name].wait()
            assert status.returncode == 143, procs[name].stderr_tail().decode()
        await until(lambda s: not s, "every bot stopped")
        nursery.cancel_scope.cancel()
    assert not doubles, doubles[:3]
    check = RedisBotStore(url)
    try:
        link = await check.link()
        leases = await link.call(lambda: link.client.keys(f"{check.prefix}lease:*"))
        # The survivors gave their leases back on the way out (the killed node's expired).
        assert leases == [] or leases == set()
    finally:
        await check.aclose()
    stderr = "".join(p.stderr_tail().decode() for p in procs.values())
    assert "sk-node-secret" not in stderr


async def _serve(spec: ProcessSpec, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    async with open_process(spec) as proc:
        task_status.started(proc)
        while await proc.receive_some():  # drained, so the node never blocks on a full pipe
            pass
        await proc.exited.wait()
