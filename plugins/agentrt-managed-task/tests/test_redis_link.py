"""The trio-native Redis link and store against a real redis-server: outages, restarts, bad input."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest
import trio

from agentrt import AgentrtError
from agentrt.redislink import LuaScript, RedisScriptError, connect_redis, open_redis


def _refused_url() -> str:
    # A loopback port nothing listens on (bound then released).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


async def test_unreachable_server_is_a_stable_code_not_a_hang() -> None:
    from agentrt_managed_task._server import open_store

    url = _refused_url()
    with trio.fail_after(30):
        with pytest.raises(AgentrtError) as link_error:
            await connect_redis(url)
        with pytest.raises(AgentrtError) as block_error:
            async with open_redis(url):
                pass
        with pytest.raises(AgentrtError) as store_error:
            await open_store(redis_url=url)
    assert link_error.value.code == block_error.value.code == "redis_unavailable"
    assert store_error.value.code == "control_plane_storage_unavailable"
    assert "redis_unavailable" in store_error.value.detail


def test_control_plane_cli_reports_an_unreachable_redis_cleanly() -> None:
    agentrt = os.path.join(os.path.dirname(sys.executable), "agentrt")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "AGENTRT_CONTROL_PLANE_API_KEY": "mt-test-key-0123456789abcdef"}
    url = _refused_url().replace("redis://", "redis://:hunter2-secret@")
    done = subprocess.run(
        [agentrt, "control-plane", "--port", "0", "--redis", url], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "control_plane_storage_unavailable" in done.stderr and "redis_unavailable" in done.stderr
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://127.0.0.1:notaport/0"])
async def test_bad_url_is_refused_with_a_code(url: str) -> None:
    with pytest.raises(AgentrtError) as info:
        await connect_redis(url)
    assert info.value.code == "redis_url_invalid"


async def test_a_password_in_the_url_never_reaches_the_error() -> None:
    url = _refused_url().replace("redis://", "redis://user:hunter2-secret@")
    with trio.fail_after(30), pytest.raises(AgentrtError) as info:
        await connect_redis(url)
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(info.value.__cause__)


async def test_missing_or_wrong_credentials_are_redis_auth_failed(password_redis: Any) -> None:
    url, password = password_redis
    with_password = url.replace("redis://", f"redis://:{password}@")
    wrong = url.replace("redis://", "redis://:not-the-password@")
    with trio.fail_after(30):
        for bad in (url, wrong):
            with pytest.raises(AgentrtError) as info:
                await connect_redis(bad)
            assert info.value.code == "redis_auth_failed" and password not in str(info.value)
        async with open_redis(with_password) as link:
            await link.ping()


async def test_scripts_run_atomically_and_their_error_replies_keep_the_reason(redis_url: str) -> None:
    incr = LuaScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    refuse = LuaScript("return redis.error_reply('stale_attempt')")
    key = f"link:{os.urandom(4).hex()}"
    async with open_redis(redis_url) as link:
        results = []

        async def add() -> None:
            results.append(await link.run(incr, keys=[key], args=[2]))

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(add)
        assert sorted(results) == list(range(2, 42, 2))
        with pytest.raises(RedisScriptError) as info:
            await link.run(refuse, keys=[key], args=[])
        assert info.value.reason == "stale_attempt"
    assert link.closed
    with pytest.raises(AgentrtError) as closed:
        await link.run(incr, keys=[key], args=[1])
    assert closed.value.code == "redis_unavailable"


async def test_store_survives_a_server_restart_without_threads(private_redis: Any, restart_redis: Any) -> None:
    from agentrt_managed_task._server import open_store

    proc, url = private_redis
    store = await open_store(redis_url=url, prefix="restart:")
    try:
        threads_before = threading.active_count()
        first, _ = await store.submit("command", {"n": 1}, "k1")
        proc.terminate()
        proc.wait(10)  # not in a worker thread: the thread count below must stay exact
        with trio.fail_after(30):
            for _ in range(3):  # every call fails fast with the code, none hangs
                with pytest.raises(AgentrtError) as down:
                    await store.submit("command", {"n": 2}, "k2")
                assert down.value.code == "redis_unavailable"
            with pytest.raises(AgentrtError):
                await store.get(first.id)
        restart_redis(url)  # an empty server: the scripts must be loaded again
        with trio.fail_after(30):
            again, created = await store.submit("command", {"n": 3}, "k3")
            await store.register_agent("w", "w")
            [claimed] = await store.claim("w", 1, 60.0, 3, 90)
        assert created and claimed.id == again.id
        assert threading.active_count() == threads_before  # no thread per call, none left behind
    finally:
        await store.aclose()


async def test_a_command_in_flight_when_the_server_dies_fails_with_the_code(private_redis: Any) -> None:
    proc, url = private_redis
    async with open_redis(url) as link, open_redis(url) as observer:
        failures: list[AgentrtError] = []

        async def blocked() -> None:
            with pytest.raises(AgentrtError) as info:
                await link.call(lambda: link.client.blpop(["never-pushed"], timeout=0))
            failures.append(info.value)

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(blocked)
                # Wait until the server itself reports the command as running, then kill it.
                while not any(c.get("cmd") == "blpop" for c in await observer.call(observer.client.client_list)):
                    await trio.sleep(0.01)
                proc.kill()
                await trio.to_thread.run_sync(proc.wait, 10)
    assert [f.code for f in failures] == ["redis_unavailable"]


def test_redis_skips_carry_their_reason(tmp_path: Any) -> None:
    # Without redis-server (and without CI) the Redis variants skip, each saying what is missing.
    bare = tmp_path / "bin"  # a PATH with nothing on it
    bare.mkdir()
    env = {"PATH": str(bare), "LANG": "C.UTF-8", "HOME": str(tmp_path)}
    test_file = os.path.join(os.path.dirname(__file__), "test_store.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", test_file],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # the distribution's root
    )
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert done.returncode == 0, done.stdout[-3000:]
    assert skips and all("redis-server is not installed: apt-get install -y redis-server" in s for s in skips), skips
