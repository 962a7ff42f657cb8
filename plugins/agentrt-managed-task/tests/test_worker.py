"""The worker: the runner's bounds, the start-up rules, leases, and results that survive outages."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import AgentrtError
from agentrt_managed_task._runner import run_command
from agentrt_managed_task._server import ControlPlaneSettings, serve_control_plane
from agentrt_managed_task._worker import WorkerSettings, resolve_allowlist

from ._waits import wait_exited, wait_file, wait_until

API_KEY = "mt-test-key-0123456789abcdef"
PY = os.path.realpath(sys.executable)


async def test_runner_merges_stderr_and_reports_the_exit_code(tmp_path: Path) -> None:
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True); sys.exit(4)"
    outcome = await run_command([PY, "-c", code], cwd=str(tmp_path), env={}, time_limit=20, max_output=1 << 20)
    assert outcome.stdout == "out\nerr\n" and outcome.exit_code == 4
    assert not outcome.timed_out and not outcome.truncated


async def test_runner_caps_output_but_keeps_reading(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('y' * 5_000_000); print('done')"
    outcome = await run_command([PY, "-c", code], cwd=str(tmp_path), env={}, time_limit=20, max_output=1000)
    assert outcome.truncated and outcome.stdout == "y" * 1000 and outcome.exit_code == 0


async def test_runner_timeout_kills_the_whole_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "g = subprocess.Popen([sys.executable, '-c',\n"
        "    'import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    # The limit leaves a loaded machine time to start both processes; the guard only catches a hang.
    with trio.fail_after(60):
        outcome = await run_command([PY, "-c", code], cwd=str(tmp_path), env={}, time_limit=5, max_output=4096)
    assert outcome.timed_out and outcome.stdout == "ready\n" and outcome.exit_code == -9
    await wait_exited(int(pidfile.read_text()))  # SIGKILL is asynchronous: wait for the kernel to finish it


async def test_runner_cancellation_kills_the_child(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    code = (
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); print('go', flush=True); time.sleep(60)"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: run_command([PY, "-c", code], cwd=str(tmp_path), env={}, time_limit=60, max_output=4096)
        )
        await wait_file(pidfile)
        nursery.cancel_scope.cancel()
    await wait_exited(int(pidfile.read_text()))


def test_worker_requires_opt_in_allowlist_and_key(tmp_path: Path) -> None:
    env = {"AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN": "1", "AWP_CONTROL_PLANE_API_KEY": API_KEY}
    base = {"control_plane": "http://127.0.0.1:8100", "work_dir": str(tmp_path)}

    def code(env: dict[str, str], allow: list[str], **extra: Any) -> str:
        with pytest.raises(AgentrtError) as info:
            WorkerSettings.from_env(env, allow=allow, **{**base, **extra})
        assert API_KEY not in str(info.value)
        return info.value.code

    assert (
        code({**env, "AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN": "yes"}, ["echo"])
        == "trusted_task_execution_requires_opt_in"
    )
    assert code(env, []) == "worker_allowlist_empty"
    assert code(env, ["/bin/echo"]) == "invalid_allowed_command"
    assert code(env, ["-rf"]) == "invalid_allowed_command"
    assert code(env, ["no-such-command-anywhere"]) == "worker_command_not_found"
    assert code({**env, "AWP_CONTROL_PLANE_API_KEY": ""}, ["echo"]) == "control_plane_api_key_missing"
    assert code({**env, "AWP_CONTROL_PLANE_API_KEY": "short"}, ["echo"]) == "invalid_control_plane_token"
    assert code(env, ["echo"], control_plane="http://example.com") == "remote_control_plane_requires_https"
    assert code(env, ["echo"], trusted_path="relative/bin") == "invalid_trusted_path"
    settings = WorkerSettings.from_env(env, allow=["echo"], **base)
    assert settings.allowed == {
        "echo": os.path.abspath(__import__("shutil").which("echo", path="/usr/local/bin:/usr/bin:/bin"))
    }
    assert API_KEY not in repr(settings)


def test_allowlist_resolves_against_the_trusted_path_only(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "mytool").write_text("#!/bin/sh\n")
    (fake / "mytool").chmod(0o755)
    assert resolve_allowlist(["mytool"], str(fake)) == {"mytool": str(fake / "mytool")}
    with pytest.raises(AgentrtError):
        resolve_allowlist(["mytool"], "/usr/bin:/bin")


async def test_commands_run_with_a_minimal_env_in_a_private_dir(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any
) -> None:
    url = await control_plane(store)
    settings = worker_settings(url)
    await run_worker(settings)
    code = "import json, os; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"
    row, _ = await store.submit("command", {"argv": ["python3", "-c", code]}, None)
    done = await wait_terminal(store, row.id)
    assert done.status == "success", done
    seen = __import__("json").loads(done.result["output"]["stdout"])
    env, cwd = seen["env"], seen["cwd"]
    assert set(env) <= {
        "HOME",
        "PATH",
        "TMPDIR",
        "TEMP",
        "TMP",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
    }
    assert env["HOME"] == cwd and cwd.startswith(os.path.join(settings.work_dir, "tasks", row.id + "--"))
    assert env["PATH"] == settings.trusted_path and env["TMPDIR"].startswith(cwd)
    assert API_KEY not in done.result["output"]["stdout"]
    assert not os.path.exists(cwd)  # the run dir is removed afterwards


async def wait_terminal(store: Any, task_id: str) -> Any:
    async def finished() -> Any:
        row = await store.get(task_id)
        return row if row.status in ("success", "failed") else None

    return await wait_until(finished)


async def wait_status(store: Any, task_id: str, status: str) -> None:
    await wait_until(lambda: _has_status(store, task_id, status))


async def _has_status(store: Any, task_id: str, status: str) -> bool:
    return bool((await store.get(task_id)).status == status)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"argv": ["rm", "-rf", "/"]}, "command is not allowlisted"),
        ({"argv": ["echo"] * 129}, "invalid argv"),
        ({"argv": ["echo", "x" * 8193]}, "invalid argv"),
        ({"argv": ["echo", "a\0"]}, "invalid argv"),
        ({"argv": "echo"}, "invalid argv"),
    ],
)
async def test_refused_commands_fail_without_running(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any, payload: Any, message: str
) -> None:
    url = await control_plane(store)
    await run_worker(worker_settings(url))
    row, _ = await store.submit("command", payload, None)
    done = await wait_terminal(store, row.id)
    assert done.status == "failed" and done.error == message and done.result["output"]["exit_code"] == -1


async def test_leases_are_renewed_while_a_long_task_runs(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any
) -> None:
    # The task outlives three leases; each lease is long enough for a loaded machine to renew it in time.
    url = await control_plane(store, lease_seconds=1.5)
    await run_worker(worker_settings(url))
    row, _ = await store.submit(
        "command", {"argv": ["python3", "-c", "import time; time.sleep(4.5); print('ok')"]}, None
    )
    done = await wait_terminal(store, row.id)
    assert done.status == "success" and done.retry_count == 0 and done.result["output"]["stdout"] == "ok\n"


async def test_result_survives_an_outage_and_a_worker_restart(
    backend: str, make_store: Any, nursery: trio.Nursery, worker_settings: Any, run_worker: Any, tmp_path: Path
) -> None:
    store = await make_store(backend)
    settings = ControlPlaneSettings(api_key=API_KEY, lease_seconds=30)
    down = trio.Event()
    url = await nursery.start(
        lambda task_status: serve_control_plane(store, settings, port=0, shutdown=down, task_status=task_status)
    )
    port = int(url.rsplit(":", 1)[1])
    gate = tmp_path / "gate"
    code = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)\nprint('finished')"
    row, _ = await store.submit("command", {"argv": ["python3", "-c", code]}, None)
    wsettings = worker_settings(url, replay_interval=3600)  # only the restart replays
    _first, stop_worker = await run_worker(wsettings)
    await wait_status(store, row.id, "running")
    down.set()  # the control plane goes away while the command runs

    async def refused() -> bool:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            return True
        await stream.aclose()
        return False

    await wait_until(refused)
    gate.write_text("go")
    outbox = Path(wsettings.work_dir) / "outbox"
    await wait_until(lambda: [p for p in outbox.iterdir() if p.suffix == ".json"])
    stop_worker.set()
    assert (await store.get(row.id)).status == "running"  # nothing delivered yet
    # The control plane comes back on the same address; a restarted worker replays its outbox.
    await nursery.start(
        lambda task_status: serve_control_plane(
            store, settings, port=port, shutdown=trio.Event(), task_status=task_status
        )
    )
    restarted, _ = await run_worker(worker_settings(url, work_dir=wsettings.work_dir))
    done = await wait_terminal(store, row.id)
    assert done.status == "success" and done.result["output"]["stdout"] == "finished\n"
    assert restarted.completed == 1
    assert not [p for p in outbox.iterdir() if p.suffix == ".json"]


async def test_a_worker_that_lost_its_lease_stops_the_command(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any, tmp_path: Path
) -> None:
    import time

    url = await control_plane(store, lease_seconds=0.6)
    await run_worker(worker_settings(url, slots=1))
    marker, pidfile = tmp_path / "marker", tmp_path / "pid"
    code = (
        "import os, sys, time\n"
        f"if os.path.exists({str(marker)!r}): print('second attempt'); sys.exit(0)\n"
        f"open({str(marker)!r}, 'w').close(); open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    row, _ = await store.submit("command", {"argv": ["python3", "-c", code]}, None)
    await wait_file(pidfile)
    # As if the worker had been partitioned past its lease: the control plane requeues the task.
    assert await store.reap(3, now=time.time() + 3600) == 1
    first_pid = int(pidfile.read_text())
    await wait_exited(first_pid)  # the next renewal is refused: the worker kills its command
    done = await wait_terminal(store, row.id)
    assert done.status == "success" and done.retry_count == 1
    assert done.result["output"]["stdout"] == "second attempt\n"


def test_pass_env_copies_only_named_variables(tmp_path: Path) -> None:
    env = {"AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN": "1", "AWP_CONTROL_PLANE_API_KEY": API_KEY, "MY_VAR": "v"}
    base = {"control_plane": "http://127.0.0.1:8100", "work_dir": str(tmp_path), "allow": ["echo"]}
    settings = WorkerSettings.from_env(env, pass_env=("MY_VAR", "ABSENT"), **base)
    assert settings.allowed_env == {"MY_VAR": "v"}
    for bad in ("PATH", "HOME", "1X", "A-B"):
        with pytest.raises(AgentrtError) as info:
            WorkerSettings.from_env(env, pass_env=(bad,), **base)
        assert info.value.code == "invalid_pass_env"


async def test_a_worker_fault_is_reported_as_an_error(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any
) -> None:
    url = await control_plane(store)
    settings = worker_settings(url)
    await run_worker(settings)
    runs = Path(settings.work_dir) / "tasks"
    runs.rmdir()
    runs.write_text("not a directory")  # the private run dir cannot be created
    row, _ = await store.submit("command", {"argv": ["echo", "x"]}, None)
    done = await wait_terminal(store, row.id)
    assert done.status == "failed" and done.error == "worker exception: NotADirectoryError"
    assert done.result["output"]["exit_code"] == -1
    runs.unlink()
    ok, _ = await store.submit("command", {"argv": ["echo", "still alive"]}, None)
    assert (await wait_terminal(store, ok.id)).status == "success"  # the worker kept going


def _rendezvous(tmp_path: Path, me: str, other: str) -> list[str]:
    # Each run marks itself started, then waits (bounded) for the other one: only concurrent runs finish.
    code = (
        "import os, sys, time\n"
        f"open({str(tmp_path / me)!r}, 'w').close()\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(tmp_path / other)!r}):\n"
        "    if time.time() > deadline: sys.exit(7)\n"
        "    time.sleep(0.01)\n"
    )
    return ["python3", "-c", code]


async def test_slots_run_tasks_concurrently(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any, tmp_path: Path
) -> None:
    url = await control_plane(store)
    await run_worker(worker_settings(url, slots=2))
    a, _ = await store.submit("command", {"argv": _rendezvous(tmp_path, "a", "b")}, None)
    b, _ = await store.submit("command", {"argv": _rendezvous(tmp_path, "b", "a")}, None)
    assert (await wait_terminal(store, a.id)).status == "success"
    assert (await wait_terminal(store, b.id)).status == "success"


async def test_a_one_slot_worker_claims_one_task_at_a_time(
    store: Any, control_plane: Any, worker_settings: Any, run_worker: Any, tmp_path: Path
) -> None:
    url = await control_plane(store)
    await run_worker(worker_settings(url, slots=1))
    gate = tmp_path / "gate"
    code = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.01)"
    first, _ = await store.submit("command", {"argv": ["python3", "-c", code]}, None)
    second, _ = await store.submit("command", {"argv": ["echo", "next"]}, None)
    await wait_status(store, first.id, "running")
    # The worker keeps polling while busy only for free slots: the second task stays pending.
    assert (await store.get(second.id)).status == "pending"
    gate.write_text("")
    assert (await wait_terminal(store, first.id)).status == "success"
    assert (await wait_terminal(store, second.id)).status == "success"


async def test_malformed_claims_do_not_kill_the_worker(worker_settings: Any, run_worker: Any) -> None:
    from agentrt.testing import ReplayRequest, ReplayResponse, serve_replay

    claims = 0

    def answer(request: ReplayRequest) -> ReplayResponse:
        nonlocal claims
        if request.path == "/v1/agent/register":
            return ReplayResponse.json({"agent_id": "w", "lease_seconds": 30})
        claims += 1
        if claims == 1:
            return ReplayResponse.json({"tasks": [{"no": "id"}, 5, {"id": "../x", "attempt_id": "a"}]})
        if claims == 2:
            return ReplayResponse.json({"tasks": "nope"})
        return ReplayResponse.json({"tasks": []})

    async with serve_replay(answer) as server:
        await run_worker(worker_settings(server.url))
        requests = await server.wait_for_requests(6)
    assert all(r.header("authorization") == f"Bearer {API_KEY}" for r in requests)
    assert [r.path.split("?")[0] for r in requests[1:6]] == ["/v1/agent/tasks/pending"] * 5
