"""Fixtures for the managed-task tests: real SQLite files, a real redis-server, real HTTP servers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
from agentrt_managed_task._server import ControlPlaneSettings, open_store, serve_control_plane
from agentrt_managed_task._store import Store
from agentrt_managed_task._worker import Worker, WorkerSettings, resolve_allowlist

API_KEY = "mt-test-key-0123456789abcdef"
PYTHON_DIR = os.path.dirname(os.path.realpath(sys.executable))
TRUSTED_PATH = os.pathsep.join(dict.fromkeys([PYTHON_DIR, "/usr/bin", "/bin"]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(port: int | None = None, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("redis-server")
    if exe is None:
        # CI installs it (.ci/run) and must run these tests; elsewhere say what is missing.
        message = "redis-server is not installed: apt-get install -y redis-server"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    port = port or _free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 10
    seen = b""
    # Synchronise on redis' own readiness line (bounded), not on a sleep.
    while b"Ready to accept connections" not in seen:
        line = proc.stdout.readline()
        if not line or time.monotonic() > deadline:
            _stop_redis(proc)
            pytest.fail(f"redis-server did not start: {seen[-500:]!r}", pytrace=False)
        seen += line
    return proc, f"redis://127.0.0.1:{port}/0"


def _stop_redis(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A private redis-server on loopback (no persistence), shared by the session; CI installs the package."""
    proc, url = _start_redis()
    try:
        yield url
    finally:
        _stop_redis(proc)


@pytest.fixture
def private_redis() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A redis-server of this test alone (the test may stop it); ``(process, url)``."""
    proc, url = _start_redis()
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            _stop_redis(proc)
        elif proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def password_redis() -> Iterator[tuple[str, str]]:
    """A redis-server of this test alone that requires a password; ``(url without it, password)``."""
    password = "pw-" + os.urandom(8).hex()
    proc, url = _start_redis(None, "--requirepass", password)
    try:
        yield url, password
    finally:
        _stop_redis(proc)


@pytest.fixture
def restart_redis() -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """``restart_redis(url)``: a new, empty redis-server on the port of ``url`` (stopped at teardown)."""
    started: list[subprocess.Popen[bytes]] = []

    def restart(url: str) -> subprocess.Popen[bytes]:
        proc, _ = _start_redis(int(url.rsplit(":", 1)[1].split("/", 1)[0]))
        started.append(proc)
        return proc

    yield restart
    for proc in started:
        _stop_redis(proc)


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    """Both storage backends.

    The redis-server is started here, in a sync fixture, so a missing one skips with its reason:
    a skip raised inside an async fixture reaches pytest through pytest-trio without its message.
    """
    if request.param == "redis":
        request.getfixturevalue("redis_url")
    return str(request.param)


@pytest.fixture
async def make_store(tmp_path: Any, request: pytest.FixtureRequest) -> Any:
    """``await make_store(kind)``: a fresh store (a new SQLite file, or a new Redis key prefix)."""
    opened: list[Store] = []
    counter = iter(range(1000))

    async def make(kind: str) -> Store:
        if kind == "sqlite":
            store = await open_store(database=str(tmp_path / f"cp-{next(counter)}.db"))
        else:
            url = request.getfixturevalue("redis_url")
            store = await open_store(redis_url=url, prefix=f"t:{os.urandom(6).hex()}:")
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
async def store(backend: str, make_store: Callable[..., Any]) -> Store:
    """A fresh store of the parametrised backend."""
    return await make_store(backend)


@pytest.fixture
def control_plane(nursery: trio.Nursery) -> Callable[..., Any]:
    """``await control_plane(store, **settings)`` -> base URL of a real server on loopback."""

    async def start(store: Store, **overrides: Any) -> str:
        settings = ControlPlaneSettings(**{"api_key": API_KEY, "maintenance_interval": 0.2, **overrides})
        shutdown = trio.Event()
        url: str = await nursery.start(
            lambda task_status: serve_control_plane(store, settings, port=0, shutdown=shutdown, task_status=task_status)
        )
        return url

    return start


@pytest.fixture
def worker_settings(tmp_path: Any) -> Callable[..., WorkerSettings]:
    """``worker_settings(url, **overrides)`` for an in-process worker allowed python3, echo, true."""

    def make(url: str, **overrides: Any) -> WorkerSettings:
        base: dict[str, Any] = {
            "base_url": url,
            "api_key": API_KEY,
            "allowed": resolve_allowlist(["python3", "echo", "true"], TRUSTED_PATH),
            "trusted_path": TRUSTED_PATH,
            "work_dir": str(tmp_path / f"worker-{os.urandom(3).hex()}"),
            "slots": 2,
            "poll_interval": 0.05,
            "retry_attempts": 3,
            "retry_initial": 0.01,
            "retry_max": 0.05,
            "replay_interval": 0.1,
        }
        base.update(overrides)
        return WorkerSettings(**base)

    return make


@pytest.fixture
def run_worker(nursery: trio.Nursery) -> Callable[..., Any]:
    """``await run_worker(settings)`` -> (worker, shutdown event); the worker runs in the test's nursery."""

    async def start(settings: WorkerSettings) -> tuple[Worker, trio.Event]:
        worker = Worker(settings)
        shutdown = trio.Event()
        await nursery.start(lambda task_status: worker.run(shutdown=shutdown, task_status=task_status))
        return worker, shutdown

    return start


AGENTRT = os.path.join(os.path.dirname(sys.executable), "agentrt")


class CliProcess:
    """A running ``agentrt`` subcommand and the ready line it printed."""

    def __init__(self, process: trio.Process, ready: dict[str, Any]) -> None:
        self.process = process
        self.ready = ready


@pytest.fixture
async def spawn_cli(tmp_path: Any) -> Any:
    """``await spawn_cli(args, env)`` -> CliProcess once its JSON ready line arrived; all reaped at teardown."""
    import json
    import signal
    import subprocess as sp

    started: list[trio.Process] = []

    async def spawn(args: list[str], env: dict[str, str]) -> CliProcess:
        # stderr goes to a file: a pipe nobody drains could fill and stall the child.
        log_path = tmp_path / f"{args[0]}-{len(started)}.stderr"
        with open(log_path, "wb") as log_file:
            process = await trio.lowlevel.open_process(
                [AGENTRT, *args], env=env, stdin=sp.DEVNULL, stdout=sp.PIPE, stderr=log_file
            )
        started.append(process)
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(20):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive_some(4096)
                if not chunk:
                    await process.wait()
                    err = log_path.read_bytes()[-4000:]
                    raise AssertionError(f"agentrt {args[0]} exited before ready: {err!r}")
                buffer += chunk
        return CliProcess(process, json.loads(buffer.split(b"\n", 1)[0]))

    yield spawn
    with trio.CancelScope(shield=True):
        for process in started:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(8):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


def cli_env(**extra: str) -> dict[str, str]:
    """A small explicit environment for ``agentrt`` children (never the test's own)."""
    return {"PATH": TRUSTED_PATH, "LANG": "C.UTF-8", "HOME": "/nonexistent", **extra}


@pytest.fixture
def cli_environment() -> Callable[..., dict[str, str]]:
    """``cli_environment(**extra)``: see :func:`cli_env`."""
    return cli_env
