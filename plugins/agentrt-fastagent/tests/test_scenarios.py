"""Every scripted scenario of the reference suite, through the real supervisor and real processes."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from agentrt.events import Diagnostic, ProcessExited

from .conftest import PROFILE, WAIT, make_binary


async def test_happy_then_graceful_stop(tmp_path: Path, sup_factory, store, recorder) -> None:
    binary = make_binary(tmp_path / "bin", "happy")
    async with sup_factory(binary) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        pid = sup.live_pid("b1")
        rec = await store.get_bot("b1")
        assert rec.status == "running" and rec.pid == pid and rec.account_id == "wx_acc_1"
        assert rec.model == PROFILE.model  # the start's model snapshot
        assert rec.last_qr_code_url.startswith("https://liteapp.weixin.qq.com/q/")
        assert rec.last_qr_code_id == "qr_1"
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped")
    rec = await store.get_bot("b1")
    assert rec.status == "stopped" and rec.pid is None and rec.restart_count == 0
    assert rec.model == PROFILE.model  # kept once stopped
    assert recorder.states("b1") == ["starting", "waiting_for_qr", "running", "stopping", "stopped"]
    assert recorder.kinds("b1") == [
        "process_started", "qr_code", "login_confirmed", "running", "stopping", "stopped",
    ]  # fmt: skip
    timeline = await store.timeline("b1")
    assert [t["type"] for t in timeline] == recorder.kinds("b1")
    assert timeline[0]["payload"]["agentId"] == "b1" and timeline[0]["payload"]["pid"] == pid


async def test_restored_happy_stop_is_not_a_crash(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped")
    rec = await store.get_bot("b1")
    assert rec.restart_count == 0 and rec.last_error_code is None and rec.backoff_until is None
    assert rec.account_id == "restored_acc_1"
    assert "runtime_error" not in recorder.kinds("b1")


async def test_startup_crash_four_times_fails(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "startup_crash")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "failed")
        rec = await store.get_bot("b1")
        await recorder.wait_for(lambda: recorder.exits("b1") == 4)
        assert rec.status == "failed" and rec.restart_count == 4 and rec.backoff_until is None
        assert rec.last_error_code == "RUNTIME_ERROR"
        assert rec.last_error_message == "IM runtime stopped"
        assert recorder.kinds("b1").count("process_started") == 4
        # failed stays failed: the reconciler does not start it again by itself
        with trio.fail_after(WAIT):
            await sup.wait_reconciled(3)
        assert sup.live_bots() == [] and recorder.kinds("b1").count("process_started") == 4
        # a user restart resets the count and starts again
        await sup.request_restart("b1")
        await recorder.wait_for(lambda: recorder.kinds("b1").count("process_started") == 5)
    states = recorder.states("b1")
    assert states[:3] == ["starting", "stopped", "starting"]
    exits = [e for e in recorder.events("b1") if isinstance(e, ProcessExited)]
    # nothing was signalled: each process exited 1 by itself
    assert [(e.returncode, e.requested) for e in exits[:4]] == [(1, False)] * 4
    assert states.count("failed") == 1


async def test_crash_then_backoff_restart(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "restored_crash"), backoff=(0.2, 0.2, 0.2)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: recorder.kinds("b1").count("stopped") == 1)
        await recorder.wait_state("b1", "stopped")
        rec = await store.get_bot("b1")
        # running reset the count, then the crash made it 1 with a backoff in the future
        assert rec.restart_count == 1 and rec.status == "stopped"
        assert rec.backoff_until is not None
        assert rec.last_error_message == "Sandbox session crashed unexpectedly"
        await recorder.wait_for(lambda: recorder.kinds("b1").count("process_started") == 2)
        await sup.request_stop("b1")


async def test_crash_after_running(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "crash_after_running"), backoff=(5.0,)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: "stopped" in recorder.kinds("b1"))
        await recorder.wait_for(lambda: recorder.exits("b1") >= 1)
        rec = await store.get_bot("b1")
        assert rec.status == "stopped" and rec.restart_count == 1
        assert rec.last_error_code == "RUNTIME_ERROR" and rec.last_error_message == "boom"
        assert rec.backoff_until is not None


async def _fatal_case(tmp_path: Path, sup_factory, store, recorder, scenario: str) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", scenario), backoff=(5.0,)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: "stopped" in recorder.kinds("b1"))
        await recorder.wait_for(lambda: recorder.exits("b1") >= 1)
        rec = await store.get_bot("b1")
        assert rec.last_error_code == "RUNTIME_ERROR"
        assert rec.last_error_message == "FastAgent emitted invalid JSONL output."
        assert rec.status == "stopped" and rec.restart_count == 1
        # the fixture printed stopping/stopped because it was SIGTERMed (reason "signal")
        stopped = [e for e in recorder.events("b1") if getattr(e, "kind", None) == "stopped"]
        assert stopped[0].data["reason"] == "signal"
        assert any(isinstance(e, Diagnostic) and e.code == "fastagent_invalid_output"
                   for e in recorder.events("b1"))  # fmt: skip
        assert recorder.states("b1") == ["starting", "stopped"]
        # SIGTERM was ours, yet the bot had not been asked to stop: a crash, exit code 0
        (exited,) = [e for e in recorder.events("b1") if isinstance(e, ProcessExited)]
        assert exited.returncode == 0 and not exited.requested


async def test_invalid_json_is_fatal(tmp_path: Path, sup_factory, store, recorder) -> None:
    await _fatal_case(tmp_path, sup_factory, store, recorder, "invalid_json")


async def test_missing_qr_url_is_fatal(tmp_path: Path, sup_factory, store, recorder) -> None:
    await _fatal_case(tmp_path, sup_factory, store, recorder, "missing_qr_url")
    assert "qr_code" not in recorder.kinds("b1")


async def test_foreign_agent_id_is_fatal(tmp_path: Path, sup_factory, store, recorder) -> None:
    await _fatal_case(tmp_path, sup_factory, store, recorder, "foreign_agent_id")
    assert "running" not in recorder.states("b1")


async def test_untrusted_qr_is_recorded_not_shown(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "untrusted_qr")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_for(lambda: "qr_code" in recorder.kinds("b1"))
        rec = await store.get_bot("b1")
        assert rec.last_error_code == "INVALID_QR_URL" and rec.last_qr_code_url is None
        assert rec.status == "starting"
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped")
    assert (await store.get_bot("b1")).restart_count == 0


async def test_stale_pid_event_ignored(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "stale_pid")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        rec = await store.get_bot("b1")
        assert rec.last_qr_code_url is None and "waiting_for_qr" not in recorder.states("b1")
        assert recorder.kinds("b1") == ["process_started", "running"]
        await sup.request_stop("b1")


async def test_stateful_restore_or_qr(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "stateful_restore_or_qr")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "waiting_for_qr")
        assert (await store.get_bot("b1")).last_qr_code_id == "reissue_qr_1"
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped")
        data = tmp_path / "instances" / "b1" / "data"
        await trio.Path(data / "accounts-runtime.jsonl").write_text("{}\n")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped", 2)


async def test_exit_without_stopped_is_a_crash(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "exit_silently"), backoff=(5.0,)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "stopped")
        await recorder.wait_for(lambda: recorder.exits("b1") == 1)
        rec = await store.get_bot("b1")
        assert rec.restart_count == 1 and rec.backoff_until is not None and rec.pid is None
        (exited,) = [e for e in recorder.events("b1") if isinstance(e, ProcessExited)]
        assert exited.returncode == 3 and not exited.requested
        assert recorder.kinds("b1") == ["process_started", "running"]


async def test_account_invalid_degrades(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "account_invalid")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "degraded")
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped")


async def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path, sup_factory, store, recorder) -> None:
    binary = make_binary(tmp_path / "bin", "restored_happy", ignore_term=True)
    async with sup_factory(binary, term_grace=0.3) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        pid = sup.live_pid("b1")
        await sup.request_stop("b1")
        await recorder.wait_for(lambda: recorder.exits("b1") >= 1)
        (exited,) = [e for e in recorder.events("b1") if type(e).__name__ == "ProcessExited"]
        assert exited.signal == 9 and exited.requested
    assert not os.path.exists(f"/proc/{pid}")  # killed and reaped
    rec = await store.get_bot("b1")
    assert rec.restart_count == 0 and rec.status == "stopped"


async def test_supervisor_shutdown_is_not_a_crash(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy")) as sup:
        for name in ("b1", "b2"):
            await sup.add_bot(name)
            await sup.request_start(name)
        await recorder.wait_state("b1", "running")
        await recorder.wait_state("b2", "running")
    for name in ("b1", "b2"):
        rec = await store.get_bot(name)
        assert rec.status == "stopped" and rec.desired_state == "running" and rec.restart_count == 0
        assert recorder.exits(name) == 1  # delivered before the sinks closed
        assert recorder.kinds(name)[-2:] == ["stopping", "stopped"]
    assert recorder.closed


async def test_qr_reissue_clears_login_state(tmp_path: Path, sup_factory, store, recorder) -> None:
    data = tmp_path / "instances" / "b1" / "data"
    data.mkdir(parents=True)
    for name in ("accounts-roster.jsonl", "accounts-runtime.jsonl", "bindings.jsonl"):
        (data / name).write_text("{}\n")
    (data / "keep.txt").write_text("not login state")
    async with sup_factory(make_binary(tmp_path / "bin", "stateful_restore_or_qr")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")  # restored from the login files
        assert (await store.get_bot("b1")).account_id == "restored_acc_1"
        await sup.request_qr_reissue("b1")
        await recorder.wait_state("b1", "waiting_for_qr")
        rec = await store.get_bot("b1")
        assert rec.account_id is None and rec.last_qr_code_id == "reissue_qr_1"
        assert rec.desired_state == "running" and rec.restart_count == 0
    assert sorted(p.name for p in data.iterdir() if not p.name.startswith(".") and p.name != "skills") == ["keep.txt"]
    assert recorder.states("b1") == [
        "starting", "running", "stopping", "stopped", "starting", "waiting_for_qr", "stopping", "stopped",
    ]  # fmt: skip
