"""The tool against real HTTP servers: the control plane with a worker, and scripted misbehaving peers."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest
import trio

from agentrt import AgentrtError
from agentrt.testing import ReplayRequest, ReplayResponse, serve_replay
from agentrt.tools import ToolContext
from agentrt_managed_task._config import ClientConfig
from agentrt_managed_task._jsjson import idempotency_key
from agentrt_managed_task._tool import ManagedTaskTool, validate_arguments

API_KEY = "mt-test-key-0123456789abcdef"
CTX = ToolContext(session_id="s-1", turn_identity="t" * 64, tool_call_id="call_1")


def tool_for(url: str, **options: Any) -> ManagedTaskTool:
    return ManagedTaskTool(ClientConfig(base_url=url, api_key=API_KEY, poll_interval=0.02, **options))


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"argv": ["echo"], "cwd": "/"}, "managed_task_arguments_invalid"),
        ({}, "managed_task_argv_invalid"),
        ({"argv": "echo hi"}, "managed_task_argv_invalid"),
        ({"argv": []}, "managed_task_argv_invalid"),
        ({"argv": ["echo"] * 33}, "managed_task_argv_invalid"),
        ({"argv": ["echo", ""]}, "managed_task_argv_invalid"),
        ({"argv": ["echo", 3]}, "managed_task_argv_invalid"),
        ({"argv": ["echo", "a\0b"]}, "managed_task_argv_invalid"),
        ({"argv": ["echo", "x" * 8193]}, "managed_task_argv_invalid"),
        ({"argv": ["echo", "😀" * 4097]}, "managed_task_argv_invalid"),  # 8194 UTF-16 units
        ({"argv": ["/bin/echo"]}, "managed_task_argv_invalid"),
        ({"argv": ["sh -c"]}, "managed_task_argv_invalid"),
        ({"argv": ["echo"] + ["é" * 8000] * 5}, "managed_task_argv_oversize"),
        ({"argv": ["echo"], "timeout_seconds": 0}, "managed_task_timeout_invalid"),
        ({"argv": ["echo"], "timeout_seconds": 300.5}, "managed_task_timeout_invalid"),
        ({"argv": ["echo"], "timeout_seconds": "60"}, "managed_task_timeout_invalid"),
        ({"argv": ["echo"], "timeout_seconds": True}, "managed_task_timeout_invalid"),
        ({"argv": ["echo"], "timeout_seconds": float("nan")}, "managed_task_timeout_invalid"),
        ({"argv": ["echo"], "timeout_seconds": float("inf")}, "managed_task_timeout_invalid"),
    ],
)
async def test_argument_validation_codes(arguments: dict[str, Any], code: str) -> None:
    async with serve_replay([]) as server:
        with pytest.raises(AgentrtError) as info:
            await tool_for(server.url).call(arguments, CTX)
        assert info.value.code == code
        assert server.requests == []  # nothing was submitted


def test_defaults_and_bounds_accepted() -> None:
    assert validate_arguments({"argv": ["echo"]}) == (["echo"], 60)
    assert validate_arguments({"argv": ["echo"] * 32, "timeout_seconds": 300}) == (["echo"] * 32, 300)
    assert validate_arguments({"argv": ["a.b-c_1"], "timeout_seconds": 1}) == (["a.b-c_1"], 1)


async def test_runs_on_a_real_worker(store: Any, control_plane: Any, worker_settings: Any, run_worker: Any) -> None:
    url = await control_plane(store)
    await run_worker(worker_settings(url))
    tool = tool_for(url)
    ok = await tool.call({"argv": ["echo", "héllo"], "timeout_seconds": 20}, CTX)
    assert ok == {"task_id": ok["task_id"], "status": "success", "exit_code": 0, "stdout": "héllo\n", "stderr": ""}
    row = await store.get(ok["task_id"])
    assert row.idempotency_key == idempotency_key("s-1", "t" * 64, "call_1", ["echo", "héllo"], 20)
    other = ToolContext(session_id="s-1", turn_identity="t" * 64, tool_call_id="call_2")
    failed = await tool.call(
        {"argv": ["python3", "-c", "import sys; print('bad', file=sys.stderr); sys.exit(3)"], "timeout_seconds": 20},
        other,
    )
    # stderr is merged into stdout on the worker, so the tool's stderr stays empty.
    assert (failed["status"], failed["exit_code"], failed["stdout"], failed["stderr"]) == ("failed", 3, "bad\n", "")


async def test_output_is_bounded_to_65536(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any
) -> None:
    url = await control_plane(store)
    await run_worker(worker_settings(url))
    result = await tool_for(url).call({"argv": ["python3", "-c", "print('x' * 70000)"], "timeout_seconds": 20}, CTX)
    assert result["status"] == "success" and result["stdout"] == "x" * 65536


async def test_deadline_reports_timeout_and_leaves_the_task(store: Any, control_plane: Any) -> None:
    url = await control_plane(store)  # no worker: the task stays pending
    result = await tool_for(url).call({"argv": ["echo"], "timeout_seconds": 1}, CTX)
    assert result == {"task_id": result["task_id"], "status": "timeout", "exit_code": None, "stdout": "", "stderr": ""}
    assert (await store.get(result["task_id"])).status == "pending"


def _row(task_id: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "status": status, **extra}


async def test_request_shape_and_polling() -> None:
    task_id = str(uuid.uuid4())
    answers = iter(
        [
            ReplayResponse.json(_row(task_id, "pending")),
            ReplayResponse.json(_row(task_id, "running")),
            ReplayResponse.json(
                _row(task_id, "success", result={"output": {"stdout": "ok", "stderr": "e", "exit_code": 0}})
            ),
        ]
    )
    async with serve_replay(lambda request: next(answers)) as server:
        result = await tool_for(server.url).call({"argv": ["echo", "ok"], "timeout_seconds": 1.5}, CTX)
        assert result == {"task_id": task_id, "status": "success", "exit_code": 0, "stdout": "ok", "stderr": "e"}
        post, *gets = server.requests
    assert [(r.method, r.path) for r in server.requests] == [
        ("POST", "/v1/tasks"),
        ("GET", f"/v1/tasks/{task_id}"),
        ("GET", f"/v1/tasks/{task_id}"),
    ]
    assert post.header("authorization") == f"Bearer {API_KEY}"
    assert post.header("accept") == "application/json"
    assert post.header("content-type") == "application/json"
    assert post.header("user-agent").startswith("agentrt")
    assert post.json == {
        "task_type": "command",
        "payload": {"argv": ["echo", "ok"]},
        "idempotency_key": idempotency_key("s-1", "t" * 64, "call_1", ["echo", "ok"], 1.5),
    }
    assert len(gets) == 2


def _bad_id_row(status: int = 200) -> ReplayResponse:
    return ReplayResponse.json(_row(str(uuid.uuid4()).upper(), "pending"), status=status)


@pytest.mark.parametrize(
    ("response", "code"),
    [
        (
            ReplayResponse(status=307, headers=[("location", "http://127.0.0.1:1/"), ("content-length", "0")]),
            "control_plane_redirect_rejected",
        ),
        (ReplayResponse.json({"detail": "x"}, status=500), "control_plane_http_500"),
        (ReplayResponse.json({"detail": "x"}, status=401), "control_plane_http_401"),
        (ReplayResponse(headers=[("content-type", "text/html")], chunks=b"<html>"), "control_plane_response_not_json"),
        (ReplayResponse.json([1, 2]), "invalid_control_plane_response"),
        (
            ReplayResponse(headers=[("content-type", "application/json")], chunks=b"{nope"),
            "invalid_control_plane_response",
        ),
        (
            ReplayResponse(headers=[("content-type", "application/json")], chunks=[b" " * 65536] * 33),
            "control_plane_response_oversize",
        ),
        (_bad_id_row(), "invalid_control_plane_task_id"),
        (ReplayResponse.json({"id": "not-a-uuid", "status": "pending"}), "invalid_control_plane_task_id"),
        (ReplayResponse.json(_row(str(uuid.uuid4()), "queued")), "invalid_control_plane_task_status"),
    ],
)
async def test_submission_response_checks(response: ReplayResponse, code: str) -> None:
    async with serve_replay([response]) as server:
        with pytest.raises(AgentrtError) as info:
            await tool_for(server.url).call({"argv": ["echo"]}, CTX)
    assert info.value.code == code
    assert API_KEY not in str(info.value)


async def test_unreachable_control_plane_is_a_clear_error() -> None:
    async with serve_replay([]) as server:
        url = server.url
    with pytest.raises(AgentrtError) as info:  # the port is closed now: nothing was sent
        await tool_for(url).call({"argv": ["echo"]}, CTX)
    assert info.value.code == "control_plane_unreachable"


async def test_lost_submission_is_an_unknown_outcome() -> None:
    async with serve_replay([ReplayResponse.dropped()]) as server:
        result = await tool_for(server.url).call({"argv": ["echo"]}, CTX)
    assert result["error"] == "control_plane_outcome_unknown" and result["task_id"] is None


async def test_slow_answer_times_out_per_request() -> None:
    # The answer would come after an hour: only the per-request timeout can end the call before the hang guard.
    async with serve_replay([ReplayResponse.json({}, delay=3600)]) as server:
        with trio.fail_after(60):
            result = await tool_for(server.url, request_timeout=0.3).call({"argv": ["echo"]}, CTX)
    assert result == {"error": "control_plane_outcome_unknown", "reason": "control_plane_timeout", "task_id": None}


async def test_poll_failure_after_submission_is_an_unknown_outcome_never_a_guess() -> None:
    task_id = str(uuid.uuid4())

    def answer(request: ReplayRequest) -> ReplayResponse:
        if request.method == "POST":
            return ReplayResponse.json(_row(task_id, "pending"))
        return ReplayResponse.json({"detail": "boom"}, status=502)

    async with serve_replay(answer) as server:
        result = await tool_for(server.url).call({"argv": ["echo"]}, CTX)
    assert result == {"error": "control_plane_outcome_unknown", "reason": "control_plane_http_502", "task_id": task_id}


async def test_poll_must_return_the_same_task() -> None:
    task_id = str(uuid.uuid4())

    def answer(request: ReplayRequest) -> ReplayResponse:
        return ReplayResponse.json(_row(task_id if request.method == "POST" else str(uuid.uuid4()), "pending"))

    async with serve_replay(answer) as server:
        result = await tool_for(server.url).call({"argv": ["echo"]}, CTX)
    assert result["reason"] == "invalid_control_plane_task_id"


async def test_terminal_output_fields_are_sanitised() -> None:
    task_id = str(uuid.uuid4())
    weird = _row(task_id, "failed", result={"output": {"stdout": 5, "exit_code": "1"}})
    async with serve_replay([ReplayResponse.json(_row(task_id, "pending")), ReplayResponse.json(weird)]) as server:
        result = await tool_for(server.url).call({"argv": ["echo"]}, CTX)
    assert result == {"task_id": task_id, "status": "failed", "exit_code": None, "stdout": "", "stderr": ""}
    assert json.dumps(result)  # JSON-serialisable for the tool message


async def test_no_fd_leak_across_calls() -> None:
    task_id = str(uuid.uuid4())
    done = ReplayResponse.json(_row(task_id, "success", result={"output": {"stdout": "", "exit_code": 0}}))

    def answer(request: ReplayRequest) -> ReplayResponse:
        return done

    async with serve_replay(answer) as server:
        tool = tool_for(server.url)
        await tool.call({"argv": ["echo"]}, CTX)  # warm up lazy imports and caches
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            assert (await tool.call({"argv": ["echo"]}, CTX))["status"] == "success"
        after = len(os.listdir("/proc/self/fd"))
    assert after <= before + 2


async def test_https_control_plane_with_a_private_ca(
    tmp_path: Any, nursery: trio.Nursery, make_store: Any, worker_settings: Any, run_worker: Any
) -> None:
    import trustme

    from agentrt_managed_task._server import ControlPlaneSettings, serve_control_plane

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    ca.cert_pem.write_to_path(str(ca_file))
    store = await make_store("sqlite")
    url = await nursery.start(
        lambda task_status: serve_control_plane(
            store,
            ControlPlaneSettings(api_key=API_KEY),
            port=0,
            shutdown=trio.Event(),
            certfile=str(certfile),
            keyfile=str(keyfile),
            task_status=task_status,
        )
    )
    assert url.startswith("https://127.0.0.1:")
    await run_worker(worker_settings(url, ca_file=str(ca_file)))
    tool = ManagedTaskTool(ClientConfig(base_url=url, api_key=API_KEY, poll_interval=0.02, ca_file=str(ca_file)))
    result = await tool.call({"argv": ["echo", "over tls"], "timeout_seconds": 20}, CTX)
    assert result["status"] == "success" and result["stdout"] == "over tls\n"
    untrusting = ManagedTaskTool(ClientConfig(base_url=url, api_key=API_KEY))
    with pytest.raises(AgentrtError) as info:  # the system store does not know this CA
        await untrusting.call({"argv": ["echo"]}, CTX)
    assert info.value.code == "control_plane_unreachable"
