"""The control plane's HTTP API (§C) over real loopback HTTP, both backends."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
import trio

from agentrt import AgentrtError
from agentrt_managed_task._server import ControlPlaneSettings, check_bind_host, load_api_key

from ._waits import wait_until

API_KEY = "mt-test-key-0123456789abcdef"
AUTH = {"authorization": f"Bearer {API_KEY}"}


def client(url: str, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers=AUTH if headers is None else headers, timeout=10)


async def test_auth_missing_wrong_and_unconfigured(store: Any, control_plane: Any) -> None:
    url = await control_plane(store)
    async with client(url, {}) as c:
        assert (await c.get("/v1/tasks")).status_code == 401
    async with client(url, {"authorization": "Bearer " + API_KEY + "x"}) as c:
        response = await c.get("/v1/tasks")
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        assert API_KEY not in response.text
    async with client(url, {"authorization": "Basic " + API_KEY}) as c:
        assert (await c.get("/v1/tasks")).status_code == 401
    unconfigured = await control_plane(store, api_key=None)
    async with client(unconfigured) as c:
        assert (await c.get("/v1/tasks")).status_code == 503
        assert (await c.post("/v1/agent/register", json={})).status_code == 503


async def test_submit_get_list_and_idempotency(store: Any, control_plane: Any) -> None:
    url = await control_plane(store)
    async with client(url) as c:
        body = {"task_type": "command", "payload": {"argv": ["echo"]}, "idempotency_key": "k1"}
        first = (await c.post("/v1/tasks", json=body)).json()
        again = (await c.post("/v1/tasks", json={**body, "payload": {"argv": ["other"]}})).json()
        assert first == again and first["status"] == "pending" and first["payload"] == {"argv": ["echo"]}
        assert "token_hash" not in first and first["result"] is None
        assert (await c.get(f"/v1/tasks/{first['id']}")).json() == first
        missing = await c.get("/v1/tasks/00000000-0000-4000-8000-000000000000")
        assert missing.status_code == 404 and missing.json() == {"detail": "task not found"}
        assert (await c.get("/v1/tasks/../etc")).status_code == 404
        listed = (await c.get("/v1/tasks", params={"status": "pending"})).json()
        assert [t["id"] for t in listed] == [first["id"]]
        assert (await c.get("/v1/tasks", params={"status": "running"})).json() == []
        assert (await c.get("/v1/tasks", params={"status": "bogus"})).status_code == 422


@pytest.mark.parametrize(
    "raw",
    [
        b'{"task_type":"command","payload":{"n":NaN}}',
        b'{"task_type":"command","payload":{"n":Infinity}}',
        b"[1]",
        b"{bad json",
        b'{"task_type":"","payload":{}}',
        b'{"task_type":"' + b"x" * 65 + b'","payload":{}}',
        b'{"task_type":"command","payload":[]}',
        b'{"task_type":"command","payload":{},"idempotency_key":""}',
        b'{"task_type":"command","payload":{},"idempotency_key":"' + b"k" * 256 + b'"}',
    ],
)
async def test_submit_validation_is_422(store: Any, control_plane: Any, raw: bytes) -> None:
    url = await control_plane(store)
    async with client(url) as c:
        response = await c.post("/v1/tasks", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert await store.list_tasks(None, 10) == []


_DEEP = b"[" * 100_000 + b"]" * 100_000
_HOSTILE = [
    b'{"task_type":"command","payload":{"deep":' + _DEEP + b"}}",  # a RecursionError in json.loads
    b'{"task_type":"command","payload":{"deep":' + b'{"a":' * 2000 + b"1" + b"}" * 2000 + b"}}",
    b'{"task_type":"command","payload":{"argv":["\\ud83d"]}}',  # half an emoji: no store can encode it
    b'{"task_type":"command","payload":{"k\\udc00":1}}',
    b'{"task_type":"command\\udfff","payload":{}}',
    b'{"task_type":"command","payload":{},"idempotency_key":"k\\ud800"}',
]


@pytest.mark.parametrize("raw", _HOSTILE, ids=["deep-lists", "deep-objects", "surrogate", "surrogate-key",
                                                "surrogate-type", "surrogate-idempotency-key"])
async def test_deeply_nested_or_lone_surrogate_bodies_are_422_never_500(
    store: Any, control_plane: Any, raw: bytes
) -> None:
    url = await control_plane(store)
    async with client(url) as c:
        for path in ("/v1/tasks", "/v1/agent/register", "/v1/agent/heartbeat"):
            response = await c.post(path, content=raw, headers={"content-type": "application/json"})
            assert response.status_code == 422, (path, response.text)
        # The server goes on.
        assert (await c.get("/v1/tasks")).status_code == 200
    assert await store.list_tasks(None, 10) == []


async def test_worker_api_lifecycle(store: Any, control_plane: Any) -> None:
    url = await control_plane(store, lease_seconds=30)
    async with client(url) as c:
        task = (await c.post("/v1/tasks", json={"task_type": "command", "payload": {"argv": ["echo"]}})).json()
        offline = await c.get("/v1/agent/tasks/pending", params={"slots": 1, "agent_id": "w1"})
        assert offline.status_code == 409
        reg = (await c.post("/v1/agent/register", json={"agent_id": "w1", "name": "one"})).json()
        assert reg == {"agent_id": "w1", "lease_seconds": 30}
        assert (await c.post("/v1/agent/heartbeat", json={"agent_id": "w1"})).json() == {"ok": True}
        assert (await c.post("/v1/agent/heartbeat", json={"agent_id": "nobody"})).status_code == 404
        for slots in (0, 65, "x"):
            bad = await c.get("/v1/agent/tasks/pending", params={"slots": slots, "agent_id": "w1"})
            assert bad.status_code == 422
        claim = (await c.get("/v1/agent/tasks/pending", params={"slots": 64, "agent_id": "w1"})).json()
        [running] = claim["tasks"]
        assert running["id"] == task["id"] and running["status"] == "running" and claim["lease_seconds"] == 30
        attempt = running["attempt_id"]
        beat = await c.post(f"/v1/agent/tasks/{task['id']}/heartbeat", json={"attempt_id": attempt})
        assert beat.status_code == 200 and beat.json()["lease_expires_at"] >= running["lease_expires_at"]
        stale = await c.post(f"/v1/agent/tasks/{task['id']}/heartbeat", json={"attempt_id": "nope"})
        assert stale.status_code == 409
        result = {
            "attempt_id": attempt,
            "status": "error",
            "output": {"exit_code": -1},
            "logs": "L" * 3000,
            "duration_s": 0.25,
        }
        for bad in (
            {**result, "status": "done"},
            {**result, "logs": "x" * 1_000_001},
            {**result, "duration_s": -1},
            {**result, "output": []},
            {k: v for k, v in result.items() if k != "attempt_id"},
        ):
            assert (await c.post(f"/v1/agent/tasks/{task['id']}/result", json=bad)).status_code == 422
        done = (await c.post(f"/v1/agent/tasks/{task['id']}/result", json=result)).json()
        # "error" from the worker is stored as failed; error = last 2000 characters of the logs.
        assert done["status"] == "failed" and done["duplicate"] is False and done["error"] == "L" * 2000
        assert done["result"] == {"output": {"exit_code": -1}, "logs": "L" * 3000, "duration_s": 0.25}
        dup = (await c.post(f"/v1/agent/tasks/{task['id']}/result", json=result)).json()
        assert dup["duplicate"] is True
        conflict = await c.post(f"/v1/agent/tasks/{task['id']}/result", json={**result, "duration_s": 1})
        assert conflict.status_code == 409
        wrong = await c.post(f"/v1/agent/tasks/{task['id']}/result", json={**result, "attempt_id": "other"})
        assert wrong.status_code == 409
        unknown = await c.post("/v1/agent/tasks/00000000-0000-4000-8000-000000000000/result", json=result)
        assert unknown.status_code == 404


async def test_maintenance_reaps_without_a_claim(store: Any, control_plane: Any) -> None:
    url = await control_plane(store, lease_seconds=0.2, max_retries=0, maintenance_interval=0.05)
    async with client(url) as c:
        task = (await c.post("/v1/tasks", json={"task_type": "command", "payload": {}})).json()
        await c.post("/v1/agent/register", json={"agent_id": "w"})
        await c.get("/v1/agent/tasks/pending", params={"slots": 1, "agent_id": "w"})
        async def failed() -> bool:
            return bool((await c.get(f"/v1/tasks/{task['id']}")).json()["status"] == "failed")

        await wait_until(failed)
        final = (await c.get(f"/v1/tasks/{task['id']}")).json()
    assert final["error"] == "task lease expired after the configured retry limit"


def test_bind_only_numeric_loopback() -> None:
    assert check_bind_host("127.0.0.1") == "127.0.0.1" and check_bind_host("::1") == "::1"
    # The one loopback rule (agentrt.net.is_loopback_host): all of 127/8, any spelling of ::1, v4-mapped too.
    assert check_bind_host("127.0.0.2") == "127.0.0.2" and check_bind_host("[0:0::1]") == "::1"
    assert ipaddress.ip_address(check_bind_host("::ffff:127.0.0.1")) == ipaddress.ip_address("::ffff:127.0.0.1")
    for host in ("0.0.0.0", "::", "localhost", "LOCALHOST", "[::1", "192.168.1.1", "::ffff:10.0.0.1", "example.com"):
        with pytest.raises(AgentrtError) as info:
            check_bind_host(host)
        assert info.value.code == "control_plane_bind_not_loopback"


def test_api_key_sources(tmp_path: Any) -> None:
    assert load_api_key({}) is None
    assert load_api_key({"AGENTRT_CONTROL_PLANE_API_KEY": API_KEY}) == API_KEY
    key_file = tmp_path / "key"
    key_file.write_text(API_KEY + "\n")
    assert load_api_key({"AGENTRT_CONTROL_PLANE_API_KEY_FILE": str(key_file)}) == API_KEY
    with pytest.raises(AgentrtError) as weak:
        load_api_key({"AGENTRT_CONTROL_PLANE_API_KEY": "short"})
    assert weak.value.code == "weak_control_plane_api_key"
    for weak in ("k" * 20, "abababababababab", "ChangeMe-ChangeMe", "0123456789abcdef"):
        with pytest.raises(AgentrtError) as placeholder:
            load_api_key({"AGENTRT_CONTROL_PLANE_API_KEY": weak})
        assert placeholder.value.code == "weak_control_plane_api_key" and weak not in str(placeholder.value)
    with pytest.raises(AgentrtError) as unreadable:
        load_api_key({}, str(tmp_path / "missing"))
    assert unreadable.value.code == "control_plane_api_key_unreadable"


def test_settings_from_env() -> None:
    s = ControlPlaneSettings.from_env({"AWP_TASK_LEASE_SECONDS": "1.5", "AWP_TASK_MAX_RETRIES": "0"}, api_key=None)
    assert (s.lease_seconds, s.max_retries) == (1.5, 0)
    assert ControlPlaneSettings.from_env({}, api_key=None).lease_seconds == 60
    with pytest.raises(AgentrtError) as info:
        ControlPlaneSettings.from_env({"AWP_TASK_LEASE_SECONDS": "nan"}, api_key=None)
    assert info.value.code == "invalid_control_plane_setting"


def test_cli_refuses_non_loopback_bind() -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "AGENTRT_CONTROL_PLANE_API_KEY": API_KEY}
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "agentrt"), "control-plane", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "control_plane_bind_not_loopback" in done.stderr


async def test_storage_outage_is_a_clear_500_not_a_hang(private_redis: Any, control_plane: Any) -> None:
    from agentrt.tools import ToolContext
    from agentrt_managed_task._server import open_store
    from agentrt_managed_task._tool import ManagedTaskTool
    from agentrt_managed_task.api import ClientConfig

    proc, url = private_redis
    store = await open_store(redis_url=url, prefix="outage:")
    try:
        base = await control_plane(store)
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait, 10)
        async with client(base) as c:
            with trio.fail_after(15):
                response = await c.post("/v1/tasks", json={"task_type": "command", "payload": {}})
        assert response.status_code == 500 and response.json() == {"detail": "internal error"}
        tool = ManagedTaskTool(ClientConfig(base_url=base, api_key=API_KEY))
        with pytest.raises(AgentrtError) as info:
            await tool.call({"argv": ["echo"]}, ToolContext(session_id="s", turn_identity="t", tool_call_id="c"))
        assert info.value.code == "control_plane_http_500"
    finally:
        await store.aclose()


async def test_maintenance_forgets_finished_tasks_past_retention(store: Any, control_plane: Any) -> None:
    # Wait on the maintenance loop's own purge (an event), not on the clock.
    purged = trio.Event()
    real_purge = store.purge

    async def purge(*args: Any) -> int:
        forgotten: int = await real_purge(*args)
        if forgotten:
            purged.set()
        return forgotten

    store.purge = purge
    url = await control_plane(store, maintenance_interval=0.05, retention_seconds=0.2)
    async with client(url) as c:
        task = (await c.post("/v1/tasks", json={"task_type": "command", "payload": {}})).json()
        await c.post("/v1/agent/register", json={"agent_id": "w"})
        [claimed] = (await c.get("/v1/agent/tasks/pending", params={"slots": 1, "agent_id": "w"})).json()["tasks"]
        result = {"attempt_id": claimed["attempt_id"], "status": "success", "output": {}, "logs": "", "duration_s": 0}
        assert (await c.post(f"/v1/agent/tasks/{task['id']}/result", json=result)).status_code == 200
        assert (await c.get(f"/v1/tasks/{task['id']}")).status_code == 200  # kept until past retention
        with trio.fail_after(60):  # a hang guard: the maintenance loop's own signal ends the wait
            await purged.wait()
        assert (await c.get(f"/v1/tasks/{task['id']}")).status_code == 404


def test_retention_setting_from_env() -> None:
    assert ControlPlaneSettings.from_env({}, api_key=None).retention_seconds == 0  # kept forever by default
    week = ControlPlaneSettings.from_env({"AGENTRT_TASK_RETENTION_SECONDS": "604800"}, api_key=None)
    assert week.retention_seconds == 604800
    with pytest.raises(AgentrtError) as info:
        ControlPlaneSettings.from_env({"AGENTRT_TASK_RETENTION_SECONDS": "-5"}, api_key=None)
    assert info.value.code == "invalid_control_plane_setting"
