"""Property: random valid lifecycle tapes, replayed by a real process, end in the state the rules give."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrt_fastagent._store import MemoryBotStore
from agentrt_fastagent._supervisor import STATES, SupervisorConfig, open_supervisor

from .conftest import Recorder, make_binary, resolver

QR = "https://liteapp.weixin.qq.com/q/abc?qrcode=1"
LINES = {
    "qr_code": {"qrCodeUrl": QR, "qrCodeId": "q"},
    "qr_untrusted": {"qrCodeUrl": "https://evil.example/q/x"},
    "login_confirmed": {"accountId": "acc"},
    "running": {"source": "restored"},
    "account_invalid": {"reason": "expired"},
    "runtime_error": {"code": "E_X", "error": "boom"},
    "stopping": {"reason": "runtime_error"},
    "stopped": {"exitCode": 1, "reason": "runtime_error"},
}


def expected(kinds: list[str]) -> tuple[list[str], int, str | None]:
    """The reference rules for a bot nobody asked to stop: states seen, restart count, last error."""
    status, states, count, error = "starting", ["starting"], 0, None
    for k in kinds:
        new = status
        if k == "qr_code":
            new = "waiting_for_qr"
        elif k == "qr_untrusted":
            error = "INVALID_QR_URL"
        elif k == "running":
            new, count, error = "running", 0, None
        elif k == "account_invalid":
            new = "degraded"
        elif k == "runtime_error":
            error = "E_X"
        elif k == "stopped":
            new, count = "stopped", count + 1
        if new != status:
            states.append(new)
            status = new
        if k == "stopped":
            return states, count, error
    # the process exits without `stopped`: a crash all the same
    if status != "stopped":
        states.append("stopped")
    return states, count + 1, error


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(sorted(LINES)), max_size=7))
async def test_random_tapes(tmp_path_factory, kinds: list[str]) -> None:
    tmp = tmp_path_factory.mktemp("tape")
    tape = tmp / "tape.jsonl"
    lines = [{"type": "process_started", "data": {"channel": "weixin"}}]
    lines += [{"type": "qr_code" if k == "qr_untrusted" else k, "data": LINES[k]} for k in kinds]
    tape.write_text(
        "".join(
            json.dumps({**x, "timestamp": "2026-03-30T10:19:04.405Z", "pid": 1, "message": "m"}) + "\n" for x in lines
        )
    )
    recorder, store = Recorder(), MemoryBotStore()
    cfg = SupervisorConfig(instances_dir=tmp / "i", backoff=(30.0,), reconcile_interval=0.05, sync_skills=False,
                           binary=make_binary(tmp / "bin", replay=str(tape)), parent_env={})  # fmt: skip
    async with open_supervisor(store, config=cfg, resolve=resolver(), sinks=[recorder]) as sup:
        await sup.add_bot("b")
        await sup.request_start("b")
        await recorder.wait_for(lambda: recorder.exits("b") == 1)
    states, count, error = expected(kinds)
    assert recorder.states("b") == states
    assert all(s in STATES for s in recorder.states("b"))
    rec = await store.get_bot("b")
    assert rec.restart_count == count and rec.status == "stopped" and rec.pid is None
    assert rec.last_error_code == error
    assert rec.backoff_until is not None
