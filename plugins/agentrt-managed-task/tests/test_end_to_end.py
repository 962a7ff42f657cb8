"""End to end, for real: ``agentrt control-plane``, ``agentrt worker`` and ``agentrt agent`` as processes.

(a) the agent asks for the tool through a replay provider, the command runs on the worker and its
output returns to the model; (b) a worker SIGKILLed mid-task: the lease expires and a second
worker retries it, or the task fails at the retry limit; (c) a repeated submission runs once.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.agent import turn_identity
from agentrt.events import TextDelta, ToolUse, TurnCompleted, TurnFailed
from agentrt.testing import ReplayResponse, serve_replay
from agentrt.tools import ToolContext
from agentrt_managed_task._config import ClientConfig
from agentrt_managed_task._jsjson import idempotency_key
from agentrt_managed_task._tool import ManagedTaskTool

from ._waits import wait_until

API_KEY = "mt-test-key-0123456789abcdef"
AGENTRT = str(Path(os.path.realpath(os.path.dirname(__import__("sys").executable))) / "agentrt")


def sse(*events: Any) -> list[bytes]:
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def tool_call_round(call_id: str, arguments: dict[str, Any]) -> list[bytes]:
    text = json.dumps(arguments)
    half = len(text) // 2
    # The tool name arrives split in two fragments, as real providers stream it.
    return sse(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "awp_run_", "arguments": text[:half]},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": "managed_task", "arguments": text[half:]}}]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 5}},
    )


def text_round(*pieces: str) -> list[bytes]:
    return sse(
        *({"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 16, "completion_tokens": 4}},
    )


async def tasks_of(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {API_KEY}"}, timeout=10) as c:
        return list((await c.get("/v1/tasks")).json())


async def start_control_plane(
    spawn_cli: Any, cli_environment: Any, tmp_path: Path, backend: str, redis_url: str | None, **env: str
) -> str:
    storage = (
        ["--database", str(tmp_path / "cp.db")]
        if backend == "sqlite"
        else ["--redis", str(redis_url), "--redis-prefix", f"e2e:{os.urandom(4).hex()}:"]
    )
    cp = await spawn_cli(
        ["control-plane", "--port", "0", *storage],
        cli_environment(AGENTRT_CONTROL_PLANE_API_KEY=API_KEY, **env),
    )
    assert cp.ready["type"] == "control_plane_ready" and cp.ready["storage"] == backend
    return str(cp.ready["url"])


async def start_worker(spawn_cli: Any, cli_environment: Any, url: str, work_dir: Path, agent_id: str) -> Any:
    worker = await spawn_cli(
        [
            "worker",
            "--control-plane",
            url,
            "--allow",
            "python3",
            "--allow",
            "echo",
            "--slots",
            "1",
            "--poll-interval",
            "0.05",
            "--work-dir",
            str(work_dir),
            "--agent-id",
            agent_id,
            "--trusted-path",
            cli_environment()["PATH"],
        ],
        cli_environment(AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN="1", AWP_CONTROL_PLANE_API_KEY=API_KEY),
    )
    assert worker.ready == {"type": "worker_ready", "agent_id": agent_id}
    return worker


@pytest.fixture
def redis_for(backend: str, request: pytest.FixtureRequest) -> str | None:
    return str(request.getfixturevalue("redis_url")) if backend == "redis" else None


async def test_agent_runs_a_managed_task_on_a_worker(
    backend: str, redis_for: str | None, spawn_cli: Any, cli_environment: Any, tmp_path: Path
) -> None:
    tmp_path.chmod(0o700)
    url = await start_control_plane(spawn_cli, cli_environment, tmp_path, backend, redis_for)
    await start_worker(spawn_cli, cli_environment, url, tmp_path / "w", "worker-a")
    argv = ["python3", "-c", "print('verified: agent-control-worker-ok')"]
    script = [
        ReplayResponse.sse(tool_call_round("call_1", {"argv": argv, "timeout_seconds": 30})),
        ReplayResponse.sse(text_round("the worker said ", "ok")),
    ]
    async with serve_replay(script) as provider:
        launch = LaunchSpec(
            executable=AGENTRT,
            prefix_args=("agent",),
            env_entries={
                "AGENTRT_API_BASE_URL": provider.url + "/v1",
                "AGENTRT_API_TOKEN": "provider-token-0123456789",
                "AGENTRT_STATE_DIR": str(tmp_path / "state"),
                "AGENTRT_MODEL": "replay-model",
                "AGENTRT_LOAD_PLUGINS": "openai,awp-jsonl,managed-task",
                "AWP_AGENT_MANAGED_TASKS_OPT_IN": "1",
                "AWP_CONTROL_PLANE_URL": url,
                "AWP_CONTROL_PLANE_API_KEY": API_KEY,
                "AGENTRT_MANAGED_TASK_POLL_MS": "50",
            },
            protocol="awp-jsonl",
            model="replay-model",
        )
        parent_env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
        with trio.fail_after(60):
            async with open_conversation(launch, parent_env=parent_env, cwd=str(tmp_path)) as conv:
                events = [ev async for ev in conv.send("run the check")]
                session_id = conv.session_id
        first, second = provider.requests
    terminals = [ev for ev in events if isinstance(ev, TurnCompleted | TurnFailed)]
    assert len(terminals) == 1 and isinstance(terminals[0], TurnCompleted), events
    assert terminals[0].result == "the worker said ok"
    assert [ev.text for ev in events if isinstance(ev, TextDelta)][-2:] == ["the worker said ", "ok"]
    uses = [ev for ev in events if isinstance(ev, ToolUse)]
    assert [(u.name, u.input) for u in uses] == [("awp_run_managed_task", {"argv": argv, "timeout_seconds": 30})]
    # The model was offered exactly the tool, and got the worker's output back.
    assert [t["function"]["name"] for t in first.json["tools"]] == ["awp_run_managed_task"]
    tool_message = second.json["messages"][-1]
    assert (tool_message["role"], tool_message["tool_call_id"]) == ("tool", "call_1")
    result = json.loads(tool_message["content"])
    assert result == {
        "task_id": result["task_id"],
        "status": "success",
        "exit_code": 0,
        "stdout": "verified: agent-control-worker-ok\n",
        "stderr": "",
    }
    [task] = await tasks_of(url)
    assert task["id"] == result["task_id"] and task["agent_id"] == "worker-a"
    assert re.fullmatch(r"awp-reference-agent:[0-9a-f]{64}", task["idempotency_key"])
    assert task["idempotency_key"] == idempotency_key(
        str(session_id), turn_identity(first.json["messages"]), "call_1", argv, 30
    )
    shown = repr(events)
    assert API_KEY not in shown and "provider-token" not in shown


def _crash_once_command(tmp_path: Path) -> list[str]:
    marker, pidfile = tmp_path / "first-attempt", tmp_path / "pid"
    code = (
        "import os, sys, time\n"
        f"marker, pidfile = {str(marker)!r}, {str(pidfile)!r}\n"
        "if os.path.exists(marker):\n"
        "    print('second attempt'); sys.exit(0)\n"
        "open(marker, 'w').close()\n"
        "open(pidfile, 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    return ["python3", "-c", code]


async def _wait_running(store: Any, task_id: str, pidfile: Path) -> None:
    async def started() -> bool:
        return bool((await store.get(task_id)).status == "running" and pidfile.exists() and pidfile.read_text())

    await wait_until(started)


async def _finished(store: Any, task_id: str) -> Any:
    row = await store.get(task_id)
    return row if row.status in ("success", "failed") else None


def _kill_orphan(pidfile: Path) -> None:
    # A safety net: the command dies with its worker (test_sigkilled_worker_takes_its_command_down).
    if pidfile.exists() and pidfile.read_text():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


async def test_killed_worker_lease_expires_and_a_second_worker_retries(
    store: Any, control_plane: Any, spawn_cli: Any, cli_environment: Any, tmp_path: Path
) -> None:
    url = await control_plane(store, lease_seconds=1.0, max_retries=3, maintenance_interval=0.2)
    row, _ = await store.submit("command", {"argv": _crash_once_command(tmp_path)}, None)
    first = await start_worker(spawn_cli, cli_environment, url, tmp_path / "wa", "worker-a")
    try:
        await _wait_running(store, row.id, tmp_path / "pid")
        attempt_a = (await store.get(row.id)).attempt_id
        first.process.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            await first.process.wait()
        await start_worker(spawn_cli, cli_environment, url, tmp_path / "wb", "worker-b")
        done = await wait_until(lambda: _finished(store, row.id))
    finally:
        _kill_orphan(tmp_path / "pid")
    assert done.status == "success" and done.agent_id == "worker-b" and done.retry_count == 1
    assert done.attempt_id != attempt_a
    assert done.result["output"]["stdout"] == "second attempt\n"


async def test_sigkilled_worker_takes_its_command_down_before_the_retry(
    store: Any, control_plane: Any, spawn_cli: Any, cli_environment: Any, tmp_path: Path
) -> None:
    from agentrt.testing import PidWatch

    url = await control_plane(store, lease_seconds=1.0, max_retries=3, maintenance_interval=0.2)
    row, _ = await store.submit("command", {"argv": _crash_once_command(tmp_path)}, None)
    worker = await start_worker(spawn_cli, cli_environment, url, tmp_path / "wa", "worker-a")
    try:
        await _wait_running(store, row.id, tmp_path / "pid")
        with PidWatch(int((tmp_path / "pid").read_text())) as command:
            worker.process.send_signal(signal.SIGKILL)
            with trio.fail_after(10):
                await worker.process.wait()
            # Its own session shields it from the worker's group: only the death signal takes it down.
            assert await trio.to_thread.run_sync(command.gone, 30), "the command outlived its SIGKILLed worker"
    finally:
        _kill_orphan(tmp_path / "pid")


async def test_killed_worker_at_the_retry_limit_fails_the_task(
    store: Any, control_plane: Any, spawn_cli: Any, cli_environment: Any, tmp_path: Path
) -> None:
    url = await control_plane(store, lease_seconds=1.0, max_retries=0, maintenance_interval=0.2)
    row, _ = await store.submit("command", {"argv": _crash_once_command(tmp_path)}, None)
    worker = await start_worker(spawn_cli, cli_environment, url, tmp_path / "wa", "worker-a")
    try:
        await _wait_running(store, row.id, tmp_path / "pid")
        worker.process.send_signal(signal.SIGKILL)
        # No second worker: the maintenance loop reaps the lease.
        done = await wait_until(lambda: _finished(store, row.id))
    finally:
        _kill_orphan(tmp_path / "pid")
    assert done.status == "failed" and done.error == "task lease expired after the configured retry limit"


async def test_repeated_submission_runs_once(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any, tmp_path: Path
) -> None:
    url = await control_plane(store)
    await run_worker(worker_settings(url))
    ledger = tmp_path / "ledger"
    argv = ["python3", "-c", f"open({str(ledger)!r}, 'a').write('ran\\n'); print('once')"]
    tool = ManagedTaskTool(ClientConfig(base_url=url, api_key=API_KEY, poll_interval=0.02))
    context = ToolContext(session_id="sess", turn_identity="f" * 64, tool_call_id="call_9")
    first = await tool.call({"argv": argv, "timeout_seconds": 20}, context)
    again = await tool.call({"argv": argv, "timeout_seconds": 20.0}, context)  # 20.0 == 20 in JS
    assert first == again and first["status"] == "success" and first["stdout"] == "once\n"
    assert ledger.read_text() == "ran\n"
    assert len(await store.list_tasks(None, 10)) == 1
    other = await tool.call(
        {"argv": argv, "timeout_seconds": 20},
        ToolContext(session_id="sess", turn_identity="f" * 64, tool_call_id="call_10"),
    )
    assert other["task_id"] != first["task_id"] and ledger.read_text() == "ran\nran\n"


async def test_services_stop_cleanly_on_sigterm(
    spawn_cli: Any, cli_environment: Any, tmp_path: Path, backend: str, redis_for: str | None
) -> None:
    url = await start_control_plane(spawn_cli, cli_environment, tmp_path, backend, redis_for)
    worker = await start_worker(spawn_cli, cli_environment, url, tmp_path / "w", "worker-z")
    worker.process.send_signal(signal.SIGTERM)
    with trio.fail_after(10):
        assert await worker.process.wait() == 0
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {API_KEY}"}) as client:
        assert (await client.get("/v1/tasks")).status_code == 200  # the control plane is still serving
