"""The four contract fixtures (fixtures/fastagent) replayed by a fixture process through the supervisor.

The fixture process writes its own pid and agent id.
"""

from __future__ import annotations

from pathlib import Path

from .conftest import CAPTURES, make_binary


async def _run(tmp_path, sup_factory, name, **kw):
    return sup_factory(make_binary(tmp_path / "bin", replay=str(CAPTURES / f"{name}.jsonl")), **kw)


async def test_fresh_qr(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with await _run(tmp_path, sup_factory, "fresh-qr") as sup:
        await sup.add_bot("bot_fresh_contract")
        await sup.request_start("bot_fresh_contract")
        await recorder.wait_state("bot_fresh_contract", "waiting_for_qr")
        rec = await store.get_bot("bot_fresh_contract")
        assert rec.last_qr_code_url == (
            "https://liteapp.weixin.qq.com/q/Fx7aQ2?qrcode=0f1e2d3c4b5a69788796a5b4c3d2e1f0&bot_type=3"
        )
        assert rec.last_qr_code_id is not None and rec.last_qr_code_id.endswith("Z")  # timestamp fallback
        await sup.request_stop("bot_fresh_contract")
        await recorder.wait_state("bot_fresh_contract", "stopped")
    assert recorder.kinds("bot_fresh_contract") == ["process_started", "qr_code", "stopping", "stopped"]
    assert (await store.get_bot("bot_fresh_contract")).restart_count == 0


async def test_login_confirmed(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with await _run(tmp_path, sup_factory, "login-confirmed") as sup:
        await sup.add_bot("b")
        await sup.request_start("b")
        await recorder.wait_state("b", "running")
        rec = await store.get_bot("b")
        assert rec.account_id == "0a1b2c3d4e5f@im.bot" and rec.status == "running"
        assert recorder.states("b") == ["starting", "waiting_for_qr", "running"]
        await sup.request_stop("b")
        await recorder.wait_state("b", "stopped")


async def test_restored_running(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with await _run(tmp_path, sup_factory, "restored-running") as sup:
        await sup.add_bot("b")
        await sup.request_start("b")
        await recorder.wait_state("b", "running")
        assert (await store.get_bot("b")).account_id == "f5e4d3c2b1a0@im.bot"
        await sup.request_stop("b")
        await recorder.wait_state("b", "stopped")
    rec = await store.get_bot("b")
    assert rec.restart_count == 0 and rec.last_error_code is None


async def test_runtime_error_is_a_crash(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with await _run(tmp_path, sup_factory, "runtime-error", backoff=(5.0,)) as sup:
        await sup.add_bot("b")
        await sup.request_start("b")
        await recorder.wait_for(lambda: recorder.exits("b") == 1)
        rec = await store.get_bot("b")
        assert rec.status == "stopped" and rec.restart_count == 1 and rec.backoff_until is not None
        assert rec.last_error_code == "RUNTIME_ERROR"
        assert rec.last_error_message == 'cannot open the data directory "IM_GATEWAY_DATA_DIR": permission denied'
    assert recorder.kinds("b") == ["process_started", "runtime_error", "stopped"]
    timeline = await store.timeline("b")
    assert [t["type"] for t in timeline] == ["process_started", "runtime_error", "stopped"]
    assert timeline[2]["payload"]["data"] == {"exitCode": 1, "reason": "runtime_error"}
