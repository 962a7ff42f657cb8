"""Supervisor edge cases: live restarts, deleted bots, broken sinks, floods, secrets, many bots."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from agentrt import AgentrtError
from agentrt.bots import BotRecord
from agentrt.events import to_json
from agentrt_fastagent._ledger import BotLedger
from agentrt_fastagent._procinfo import process_start_time
from agentrt_fastagent._store import JsonFileBotStore, MemoryBotStore, TimelineSink
from agentrt_fastagent._supervisor import SupervisorConfig, open_supervisor

from .conftest import PROFILE, WAIT, make_binary, resolver


async def test_restart_of_a_live_bot(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        first = sup.live_pid("b1")
        await sup.request_restart("b1")
        await recorder.wait_state("b1", "running", 2)
        assert sup.live_pid("b1") not in (None, first)
        rec = await store.get_bot("b1")
        assert rec.desired_state == "running" and rec.restart_count == 0
    assert recorder.states("b1")[:5] == ["starting", "running", "stopping", "stopped", "starting"]


async def test_bot_deleted_while_running(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy")) as sup:
        for b in ("gone", "kept"):
            await sup.add_bot(b)
            await sup.request_start(b)
        await recorder.wait_state("gone", "running")
        await recorder.wait_state("kept", "running")
        await store.delete_bot("gone")
        await sup.wait_reconciled(1)  # no record: desired state is "not running"
        # the deleted bot's process is stopped, the other one is untouched
        await recorder.wait_for(lambda: recorder.exits("gone") == 1)
        assert sup.live_bots() == ["kept"]


async def test_a_failing_sink_is_detached(tmp_path: Path, store, recorder, capfd) -> None:
    class Broken:
        name = "broken"
        policy = "block"
        buffer_size = 4

        async def handle(self, batch):
            raise RuntimeError("disk full")

        async def aclose(self):
            pass

    cfg = SupervisorConfig(instances_dir=tmp_path / "i", binary=make_binary(tmp_path / "bin", "restored_happy"),
                           reconcile_interval=0.05, parent_env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    async with open_supervisor(store, config=cfg, resolve=resolver(), sinks=[Broken(), recorder]) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
    assert "sink 'broken' failed and was detached" in capfd.readouterr().err


async def test_no_secret_in_events_records_or_logs(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "startup_crash")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "failed")
    dump = json.dumps([to_json(e) for e in recorder.events()], default=str)
    dump += json.dumps(list(await store.timeline("b1")), default=str) + repr(await store.get_bot("b1"))
    logs = (tmp_path / "instances" / "b1" / "logs" / "fastagent.stderr.log").read_text()
    assert PROFILE.api_key not in dump + logs


async def test_flooding_line_is_fatal(tmp_path: Path, sup_factory, store, recorder) -> None:
    script = tmp_path / "flood" / "fastagent"
    script.parent.mkdir()
    script.write_text(
        f"#!{shutil.which('python3')} -SE\n"
        "import os, sys, signal, json\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "line = {'type': 'process_started', 'timestamp': '2026-03-30T10:19:04.405Z', 'pid': os.getpid(),"
        " 'message': 'm', 'data': {}}\n"
        "sys.stdout.write(json.dumps(line) + '\\n'); sys.stdout.flush()\n"
        "chunk = 'x' * 65536\n"
        "while True:\n"
        "    sys.stdout.write(chunk); sys.stdout.flush()\n"
    )
    script.chmod(0o755)
    async with sup_factory(script, backoff=(5.0,)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: recorder.exits("b1") == 1)
    rec = await store.get_bot("b1")
    assert rec.last_error_code == "RUNTIME_ERROR" and rec.restart_count == 1 and rec.status == "stopped"


async def test_unknown_bot_requests(tmp_path: Path, sup_factory) -> None:
    async with sup_factory(make_binary(tmp_path / "bin")) as sup:
        with pytest.raises(AgentrtError) as info:
            await sup.request_start("nobody")
        assert info.value.code == "unknown_bot"
        with pytest.raises(AgentrtError) as info:
            await sup.add_bot("../x")
        assert info.value.code == "invalid_bot_id"


def test_config_validation() -> None:
    for bad in ({"backoff": ()}, {"backoff": (-1.0,)}, {"max_restarts": 0}, {"reconcile_interval": 0}):
        with pytest.raises(AgentrtError) as info:
            SupervisorConfig(instances_dir=Path("/tmp/x"), **bad)
        assert info.value.code == "invalid_supervisor_config"


async def test_json_store_round_trip_and_timeline(tmp_path: Path) -> None:
    store = JsonFileBotStore(tmp_path / "s")
    assert await store.list_bots() == [] and await store.get_bot("a") is None
    rec = BotRecord(bot_id="b", desired_state="running", status="running", pid=12, config={"profile": "p"})
    await store.save_bot(rec)
    await store.save_bot(BotRecord(bot_id="a"))
    got = await store.get_bot("b")
    assert got is not None and got.pid == 12 and got.config == {"profile": "p"} and got.updated_at
    assert [r.bot_id for r in await store.list_bots()] == ["a", "b"]
    for i in range(5):
        await store.append_timeline("b", {"type": "running", "message": str(i), "payload": {}})
    page = await store.timeline("b", offset=1, limit=2)
    assert [p["message"] for p in page] == ["1", "2"]
    # a second store on the same directory (another process in real life) sees the same data
    assert (await JsonFileBotStore(tmp_path / "s").get_bot("b")) == got
    await store.delete_bot("b")
    assert await store.get_bot("b") is None and await store.timeline("b") == []
    (tmp_path / "s" / "bots.json").write_text("{broken")
    with pytest.raises(AgentrtError) as info:
        await store.list_bots()
    assert info.value.code == "bot_store_corrupt"


async def test_timeline_sink_over_memory_store() -> None:
    from agentrt.events import EventBatch, Lifecycle, StateChanged

    store = MemoryBotStore()
    sink = TimelineSink(store)
    ev = Lifecycle(kind="running", message="m", pid=1, timestamp="2026-03-30T10:44Z", data={"a": 1}, agent_id="b")
    await sink.handle(EventBatch(source="b", first_seq=0, mono=0, wall=0, events=(ev, StateChanged(state="x"))))
    assert await store.timeline("b") == [
        {"type": "running", "message": "m", "payload": {"agentId": "b", "data": {"a": 1}, "pid": 1,
                                                        "timestamp": "2026-03-30T10:44Z"}}
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
async def test_many_bots_with_the_c_fixture(tmp_path: Path, sup_factory, store, recorder) -> None:
    binary = tmp_path / "fastagent"
    src = Path(__file__).parent / "fixtures" / "fastagent_fixture.c"
    await trio.to_thread.run_sync(
        lambda: subprocess.run(["cc", "-O2", "-o", str(binary), str(src)], check=True, timeout=60)
    )
    bare = await trio.run_process([str(binary), "--output", "jsonl"], check=False, capture_stdout=True,
                                  capture_stderr=True)  # fmt: skip
    assert bare.returncode != 0 and bare.stdout == b""
    names = [f"bot{i:02d}" for i in range(30)]
    async with sup_factory(binary) as sup:
        for n in names:
            await sup.add_bot(n)
            await sup.request_start(n)
        with trio.fail_after(WAIT * 3):
            for n in names:
                await recorder.wait_state(n, "running")
        assert len(sup.live_bots()) == 30
    for n in names:
        rec = await store.get_bot(n)
        assert rec.status == "stopped" and rec.restart_count == 0
        assert recorder.kinds(n) == ["process_started", "running", "stopping", "stopped"]


async def test_a_concurrent_desired_state_write_is_not_overwritten(tmp_path: Path, recorder) -> None:
    import attrs

    class RacyStore(MemoryBotStore):
        """Another process sets desired=stopped right after each supervisor read, once armed."""

        armed = False

        async def get_bot(self, bot_id):
            rec = await super().get_bot(bot_id)
            if self.armed and rec is not None:
                self.armed = False
                await super().save_bot(attrs.evolve(rec, desired_state="stopped"))
            return rec

    store = RacyStore()
    ledger = BotLedger(store, recorder.handle)  # what the supervisor writes every record change through
    await store.save_bot(BotRecord(bot_id="b1", desired_state="running", status="failed"))
    store.armed = True
    new = await ledger.update("b1", lambda r: attrs.evolve(r, last_error_code="X", status="stopped"))
    assert new.desired_state == "stopped"
    assert (await MemoryBotStore.get_bot(store, "b1")).desired_state == "stopped"
    assert recorder.states("b1") == ["stopped"]  # the change went out once it was saved


async def test_json_store_atomic_update(tmp_path: Path) -> None:
    import attrs

    store = JsonFileBotStore(tmp_path / "s")
    assert await store.update_bot("nope", lambda r: r) is None
    await store.save_bot(BotRecord(bot_id="b", status="running"))
    old, new = await store.update_bot("b", lambda r: attrs.evolve(r, status="stopping"))
    assert old.status == "running" and new.status == "stopping"
    assert (await store.get_bot("b")).status == "stopping"

    # many concurrent updates from threads (as CLI + supervisor would): none is lost
    async with trio.open_nursery() as n:
        for _ in range(20):
            n.start_soon(store.update_bot, "b", lambda r: attrs.evolve(r, restart_count=r.restart_count + 1))
    assert (await store.get_bot("b")).restart_count == 20


async def test_exit_while_a_grandchild_holds_stdout(tmp_path: Path, sup_factory, store, recorder) -> None:
    binary = make_binary(tmp_path / "bin", "grandchild_holds_stdout")
    async with sup_factory(binary, backoff=(5.0,), exit_grace=0.2) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: recorder.exits("b1") == 1)
        (exited,) = [e for e in recorder.events("b1") if type(e).__name__ == "ProcessExited"]
        assert exited.returncode == 5 and not exited.requested
        rec = await store.get_bot("b1")
        assert rec.restart_count == 1 and rec.status == "stopped"


async def test_store_failure_under_one_bot_spares_the_others(tmp_path: Path, recorder, capfd) -> None:
    class FlakyStore(MemoryBotStore):
        failures = 1

        async def save_bot(self, record):
            if record.bot_id == "flaky" and record.status == "running" and self.failures:
                self.failures -= 1
                raise OSError(28, "No space left on device")
            await super().save_bot(record)

    store = FlakyStore()
    cfg = SupervisorConfig(instances_dir=tmp_path / "i", binary=make_binary(tmp_path / "bin", "restored_happy"),
                           reconcile_interval=0.05, parent_env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    async with open_supervisor(store, config=cfg, resolve=resolver(), sinks=[recorder]) as sup:
        for b in ("flaky", "steady"):
            await sup.add_bot(b)
            await sup.request_start(b)
        await recorder.wait_state("steady", "running")
        # the flaky bot's process was stopped with its task, then started again and reached running
        await recorder.wait_state("flaky", "running")
        assert recorder.kinds("flaky").count("process_started") == 2
        assert recorder.kinds("steady").count("process_started") == 1
    assert "No space left on device" in capfd.readouterr().err


_INCREMENTS = r"""
import sys, attrs, trio
from agentrt_sqlite.api import SqliteStore
async def main():
    store = SqliteStore(__import__("pathlib").Path(sys.argv[1]))
    for i in range(int(sys.argv[2])):
        await store.update_bot("b", lambda r: attrs.evolve(r, restart_count=r.restart_count + 1))
        if i == 0:
            print("incrementing", flush=True)  # the parent starts its own increments now
    await store.aclose()
trio.run(main)
"""


async def test_database_store_atomic_update_across_processes(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import attrs

    from agentrt.bots import AtomicBotStore
    from agentrt_sqlite.api import SqliteStore

    path = tmp_path / "bots.db"
    store = SqliteStore(path)
    assert isinstance(store, AtomicBotStore) and isinstance(JsonFileBotStore(tmp_path / "j"), AtomicBotStore)
    assert not isinstance(MemoryBotStore(), AtomicBotStore)
    assert await store.update_bot("nope", lambda r: r) is None
    await store.save_bot(BotRecord(bot_id="b", status="running", updated_at=1.0))
    old, new = await store.update_bot("b", lambda r: attrs.evolve(r, status="stopping"))
    assert old.status == "running" and new.status == "stopping" and new.updated_at and new.updated_at > 1.0
    same_old, same_new = await store.update_bot("b", lambda r: r)  # unchanged: nothing written
    assert same_new is same_old and same_old.updated_at == new.updated_at
    # Another process increments while this one does: no update is lost (each read-modify-write
    # holds the database's write lock from its read to its write).
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", _INCREMENTS, str(path), "300"], env=env, stdout=subprocess.PIPE
    )
    try:
        with trio.fail_after(60):
            assert proc.stdout is not None
            # Start once the other process says it is incrementing, so the two really overlap.
            assert b"incrementing" in await proc.stdout.receive_some()
            for _ in range(300):
                await store.update_bot("b", lambda r: attrs.evolve(r, restart_count=r.restart_count + 1))
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
        if proc.stdout is not None:
            await proc.stdout.aclose()
    final = await store.get_bot("b")
    assert final is not None and final.restart_count == 600
    await store.aclose()


async def _wait_gone(pid: int) -> None:
    """Wait (bounded) until ``pid`` has exited, on its pidfd: no polling."""
    import os

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with trio.fail_after(WAIT):
            await trio.lowlevel.wait_readable(fd)
    finally:
        trio.lowlevel.notify_closing(fd)
        os.close(fd)


async def test_exit_while_a_detached_grandchild_holds_stdout(tmp_path: Path, sup_factory, store, recorder) -> None:
    """The grandchild left the bot's process group: the exit is still recorded and the holder killed."""
    pidfile = tmp_path / "helper.pid"
    binary = make_binary(tmp_path / "bin", "detached_grandchild_holds_stdout", pidfile=str(pidfile))
    async with sup_factory(binary, backoff=(5.0,)) as sup:  # the default exit grace (2 s)
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: recorder.exits("b1") == 1)
        helper = int(pidfile.read_text())
        await _wait_gone(helper)  # it was killed: it would otherwise pause forever
        rec = await store.get_bot("b1")
        assert rec.restart_count == 1 and rec.status == "stopped" and rec.pid is None
        codes = [e.code for e in recorder.events("b1") if type(e).__name__ == "Diagnostic"]
        assert codes == ["fastagent_stdout_held"]


async def test_a_claimed_pid_is_never_recorded(tmp_path: Path, sup_factory, store, recorder) -> None:
    """A bot naming another process's pid gets a diagnostic; the record keeps the spawned pid."""
    import sys

    decoy = subprocess.Popen([sys.executable, "-S", "-c", "import signal; signal.pause()"])
    try:
        binary = make_binary(tmp_path / "bin", "claims_pid", claim_pid=decoy.pid)
        async with sup_factory(binary) as sup:
            await sup.add_bot("b1")
            await sup.request_start("b1")
            await recorder.wait_state("b1", "running")
            rec = await store.get_bot("b1")
            spawned = sup.live_pid("b1")
            assert rec.pid == spawned != decoy.pid
            assert rec.process_started_at == process_start_time(spawned)
            (diag,) = [e for e in recorder.events("b1") if type(e).__name__ == "Diagnostic"]
            assert diag.code == "fastagent_pid_claim_ignored" and str(decoy.pid) in diag.detail
            await sup.request_stop("b1")
            await recorder.wait_state("b1", "stopped")
        assert decoy.poll() is None  # never signalled
    finally:
        decoy.kill()
        decoy.wait()
