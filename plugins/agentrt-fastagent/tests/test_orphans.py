"""A supervisor restart: recorded pids are checked against their start time before any signal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import trio

from agentrt.bots import BotRecord
from agentrt_fastagent._procinfo import process_start_time, terminate_orphan

from .conftest import make_binary


def spawn_orphan(binary: Path, bot: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(binary), "--channel", "weixin", "--output", "jsonl"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        env={"PATH": os.environ["PATH"], "IM_GATEWAY_AGENT_ID": bot}, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    # its second line ("running") means the signal handlers are installed
    proc.stdout.readline()
    proc.stdout.readline()
    return proc


async def test_orphan_with_matching_start_time_is_terminated(tmp_path: Path, sup_factory, store, recorder):
    binary = make_binary(tmp_path / "bin", "restored_happy")
    orphan = spawn_orphan(binary, "b1")
    try:
        started = process_start_time(orphan.pid)
        await store.save_bot(BotRecord(bot_id="b1", desired_state="stopped", status="running",
                                       pid=orphan.pid, process_started_at=started))  # fmt: skip
        async with sup_factory(binary):
            pass
        assert orphan.wait(timeout=5) == 0  # it got SIGTERM and stopped cleanly
        assert b'"stopped"' in orphan.stdout.read()
    finally:
        orphan.kill()
        orphan.wait()
        orphan.stdout.close()
    rec = await store.get_bot("b1")
    assert rec.status == "stopped" and rec.pid is None
    (checked,) = [e for e in recorder.events("b1") if getattr(e, "kind", "") == "orphan_checked"]
    assert checked.label == "terminated"


async def test_reused_pid_is_never_signalled(tmp_path: Path, sup_factory, store, recorder):
    binary = make_binary(tmp_path / "bin", "restored_happy")
    orphan = spawn_orphan(binary, "b1")
    try:
        await store.save_bot(BotRecord(bot_id="b1", desired_state="stopped", status="running",
                                       pid=orphan.pid, process_started_at="2001-01-01T00:00:00.00Z"))  # fmt: skip
        async with sup_factory(binary):
            pass
        assert orphan.poll() is None  # still alive: not ours to kill
    finally:
        orphan.kill()
        orphan.wait()
        orphan.stdout.close()
    (checked,) = [e for e in recorder.events("b1") if getattr(e, "kind", "") == "orphan_checked"]
    assert checked.label == "mismatch"
    assert (await store.get_bot("b1")).pid is None


async def test_running_orphan_is_replaced_by_a_new_process(tmp_path: Path, sup_factory, store, recorder):
    binary = make_binary(tmp_path / "bin", "restored_happy")
    orphan = spawn_orphan(binary, "b1")
    try:
        await store.save_bot(BotRecord(bot_id="b1", desired_state="running", status="running",
                                       pid=orphan.pid, process_started_at=process_start_time(orphan.pid),
                                       restart_count=2))  # fmt: skip
        async with sup_factory(binary) as sup:
            await recorder.wait_state("b1", "running")
            assert sup.live_pid("b1") not in (None, orphan.pid)
            assert orphan.wait(timeout=5) == 0
    finally:
        orphan.kill()
        orphan.wait()
        orphan.stdout.close()
    assert recorder.states("b1")[:2] == ["stopped", "starting"]


def test_terminate_orphan_escalates_to_sigkill(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", "restored_happy", ignore_term=True)
    orphan = spawn_orphan(binary, "b1")
    try:
        outcome = terminate_orphan(orphan.pid, process_start_time(orphan.pid), term_wait=0.3, poll=0.02)
        assert outcome == "killed"
        assert orphan.wait(timeout=5) == -9
    finally:
        orphan.kill()
        orphan.wait()
        orphan.stdout.close()


def test_supervisor_lock_is_exclusive(tmp_path: Path) -> None:
    from agentrt import AgentrtError
    from agentrt_fastagent._store import MemoryBotStore
    from agentrt_fastagent._supervisor import SupervisorConfig, open_supervisor

    from .conftest import resolver

    async def main() -> None:
        cfg = SupervisorConfig(instances_dir=tmp_path / "inst", binary=tmp_path / "x")
        async with open_supervisor(MemoryBotStore(), config=cfg, resolve=resolver()):
            try:
                async with open_supervisor(MemoryBotStore(), config=cfg, resolve=resolver()):
                    raise AssertionError("second supervisor must not start")
            except AgentrtError as exc:
                assert exc.code == "supervisor_already_running"
            else:
                raise AssertionError("no error")

    trio.run(main)


def test_sweep_after_the_leader_died_kills_only_members_carrying_the_bots_marker(tmp_path: Path) -> None:
    """With the bot already gone (say, killed with its supervisor), its group's helpers are still found."""
    from agentrt_fastagent._procinfo import group_members, stop_orphan_tree

    pidfile = tmp_path / "helper.pid"
    binary = make_binary(tmp_path / "bin", "helper_in_group", pidfile=str(pidfile))
    data = tmp_path / "instances" / "b1" / "data"
    leader = subprocess.Popen(
        [str(binary), "--channel", "weixin", "--output", "jsonl"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        env={"PATH": os.environ["PATH"], "IM_GATEWAY_AGENT_ID": "b1", "IM_GATEWAY_DATA_DIR": str(data)},
        start_new_session=True,
    )  # fmt: skip
    assert leader.stdout is not None
    try:
        leader.stdout.readline()
        leader.stdout.readline()  # "running": the helper's pid is written
        helper = int(pidfile.read_text())
        started = process_start_time(leader.pid)
        leader.kill()
        leader.wait()  # reaped: only the helper is left in the group
        assert group_members(leader.pid) == [helper]
        other = f"IM_GATEWAY_DATA_DIR={tmp_path / 'elsewhere'}".encode()
        assert stop_orphan_tree(leader.pid, started, marker=other, poll=0.02) == ("mismatch", 0)
        assert group_members(leader.pid) == [helper]  # not provably ours: left alone
        marker = f"IM_GATEWAY_DATA_DIR={data}".encode()
        assert stop_orphan_tree(leader.pid, started, marker=marker, poll=0.02) == ("mismatch", 1)
        assert group_members(leader.pid) == []
    finally:
        for pid in group_members(leader.pid):
            os.kill(pid, 9)
        leader.kill()
        leader.wait()
        leader.stdout.close()
