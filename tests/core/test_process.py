"""AgentProcess: spawn, exit classification, bounded stop escalation, stderr, stdin."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
from typing import Any

import pytest
import trio
import trio.testing

from agentrt import AgentrtError
from agentrt._framing import JsonlReader, Malformed, OutputOversize
from agentrt._launch import SAFE_ENV_KEYS, LaunchSpec
from agentrt._process import READ_SIZE, AgentProcess, ExitStatus, ProcessSpec, open_process
from agentrt.dialect import AgentCodec, Dialect, HostCodec
from agentrt.testing import fixture_agent_argv, write_fixture_agent

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
USER_LINE = b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}\n'
SHUTDOWN = b'{"type":"shutdown"}\n'


def py(code: str, **kw: Any) -> ProcessSpec:
    return ProcessSpec(argv=(sys.executable, "-S", "-c", code), env=ENV, **kw)


def fixture(mode: str, *extra: str, **kw: Any) -> ProcessSpec:
    return ProcessSpec(argv=fixture_agent_argv(mode, *extra), env=ENV, **kw)


class Reader(JsonlReader):
    """A JsonlReader that keeps objects parsed past the one a test waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.backlog: list[Any] = []


async def read_until(proc: AgentProcess, reader: Reader, pred: Any, limit: float = 10) -> list[Any]:
    """Objects read until one satisfies ``pred`` (or EOF), bounded by ``limit`` seconds."""
    backlog = reader.backlog
    out: list[Any] = []
    with trio.fail_after(limit):
        while True:
            while backlog:
                obj = backlog.pop(0)
                out.append(obj)
                if pred(obj):
                    return out
            chunk = await proc.receive_some()
            if not chunk:
                return out + reader.finish()
            backlog += reader.feed(chunk)


def is_result(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "result"


async def read_to_eof(proc: AgentProcess, limit: float = 10) -> bytes:
    data = bytearray()
    with trio.fail_after(limit):
        while chunk := await proc.receive_some():
            data += chunk
    return bytes(data)


def assert_reaped(pid: int) -> None:
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


# --- exit classification --------------------------------------------------------------


async def test_normal_turn_then_eof_exit() -> None:
    async with open_process(fixture("normal", "--model", "m1")) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
        assert [o["type"] for o in objs] == [
            "system",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "result",
        ]
        assert objs[0]["model"] == "m1"
        assert "".join(o["delta"]["text"] for o in objs[2:4]) == "echo: hello"
        await proc.close_stdin()
        with trio.fail_after(10):
            status = await proc.wait()
    assert status == ExitStatus(returncode=0, signal=None, requested=False)
    assert status.kind == "exited"
    assert proc.exit_status is status
    assert_reaped(proc.pid)


async def test_crash_exit_code() -> None:
    async with open_process(py("import sys; sys.stderr.write('boom\\n'); sys.exit(5)")) as proc:
        with trio.fail_after(10):
            status = await proc.wait()
    assert (status.returncode, status.signal, status.kind) == (5, None, "crashed")
    assert proc.stderr_tail() == b"boom\n"
    assert (await proc.stop()) is status  # stop after exit changes nothing


async def test_killed_by_signal_is_a_crash() -> None:
    async with open_process(py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")) as proc:
        with trio.fail_after(10):
            status = await proc.wait()
    assert (status.returncode, status.signal, status.kind) == (None, signal.SIGKILL, "crashed")


async def test_signal_we_send_without_stop_is_a_crash() -> None:
    async with open_process(fixture("normal")) as proc:
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            status = await proc.wait()
    assert status.signal == signal.SIGTERM
    assert status.kind == "crashed"


# A child that exits on EOF gets a generous grace: on a loaded machine its start-up alone may outlast
# the default half second, and the test is about the clean exit, not how fast it comes.
CLEAN_EXIT_GRACE = 30.0


async def test_requested_stop_closes_stdin_and_the_child_exits_cleanly() -> None:
    async with open_process(fixture("normal", shutdown_grace=CLEAN_EXIT_GRACE)) as proc:
        with trio.fail_after(60):
            status = await proc.stop()
        assert proc.exited.is_set()
    assert status == ExitStatus(returncode=0, signal=None, requested=True)
    assert status.kind == "requested"
    assert_reaped(proc.pid)


async def test_shutdown_line_is_written_first() -> None:
    code = "import sys; line = sys.stdin.readline(); sys.stderr.write('got ' + line); sys.exit(7)"
    async with open_process(py(code, shutdown_line=SHUTDOWN, shutdown_grace=CLEAN_EXIT_GRACE)) as proc:
        with trio.fail_after(60):
            status = await proc.stop()
    assert status.returncode == 7 and status.kind == "requested"
    assert proc.stderr_tail() == b"got " + SHUTDOWN


async def test_sigterm_after_shutdown_grace() -> None:
    # Does not read stdin, does not ignore SIGTERM: the second step ends it.
    spec = py("import time; time.sleep(60)", shutdown_grace=0.05)
    async with open_process(spec) as proc:
        with trio.fail_after(10):
            status = await proc.stop()
    assert status.signal == signal.SIGTERM and status.kind == "requested"


# Ignores SIGTERM, the shutdown line and EOF; says "ready" once SIGTERM is ignored,
# so that a test never races the child's start-up.
IGNORE_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


async def wait_ready(proc: AgentProcess) -> None:
    with trio.fail_after(10):
        assert await proc.receive_some() == b"ready\n"


async def test_child_ignoring_sigterm_is_killed_within_the_bound() -> None:
    spec = py(IGNORE_TERM, shutdown_line=SHUTDOWN, shutdown_grace=0.05, term_grace=0.2)
    async with open_process(spec) as proc:
        await wait_ready(proc)
        # A hang guard: both graces plus the kill take far less, and the child would sleep 120 s.
        with trio.fail_after(60):
            status = await proc.stop()
    assert status.signal == signal.SIGKILL
    assert status.kind == "requested"
    assert_reaped(proc.pid)


async def test_hang_fixture_is_ended_by_a_requested_stop() -> None:
    spec = fixture("hang", shutdown_line=SHUTDOWN, shutdown_grace=0.05, term_grace=0.1)
    async with open_process(spec) as proc:
        await proc.send(USER_LINE)
        with trio.fail_after(60):
            status = await proc.stop()
    # SIGTERM if it arrived before the fixture could ignore it, else SIGKILL.
    assert status.signal in (signal.SIGTERM, signal.SIGKILL)
    assert status.kind == "requested"


async def test_stop_is_idempotent_and_concurrent_callers_share_it() -> None:
    spec = py(IGNORE_TERM, shutdown_grace=0.05, term_grace=0.1)
    results: list[ExitStatus] = []
    async with open_process(spec) as proc:
        await wait_ready(proc)

        async def stopper() -> None:
            results.append(await proc.stop())

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(stopper)
        again = await proc.stop()
    assert len(results) == 3
    assert all(r is results[0] for r in results) and again is results[0]
    assert results[0].signal == signal.SIGKILL


async def test_stop_survives_the_callers_cancellation() -> None:
    spec = py(IGNORE_TERM, shutdown_grace=0.05, term_grace=0.1)
    async with open_process(spec) as proc:
        await wait_ready(proc)
        with trio.CancelScope() as scope:
            scope.cancel()
            status = await proc.stop()  # shielded: runs to the end anyway
        assert status.signal == signal.SIGKILL


async def test_cancelling_the_callers_scope_stops_the_child() -> None:
    procs: list[AgentProcess] = []
    with trio.CancelScope() as scope:
        async with open_process(fixture("normal")) as proc:
            procs.append(proc)
            await proc.send(USER_LINE)
            await read_until(proc, Reader(), lambda o: o.get("type") == "system")
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    proc = procs[0]
    assert proc.exited.is_set()
    assert proc.exit_status is not None and proc.exit_status.kind == "requested"
    assert_reaped(proc.pid)
    with pytest.raises(trio.ClosedResourceError):
        await proc.receive_some()


async def test_body_exception_propagates_unwrapped_and_the_child_is_stopped() -> None:
    procs: list[AgentProcess] = []

    class Boom(Exception):
        pass

    with pytest.raises(Boom) as info:
        async with open_process(fixture("normal")) as proc:
            procs.append(proc)
            raise Boom("x")
    assert type(info.value) is Boom
    assert procs[0].exit_status is not None and procs[0].exit_status.kind == "requested"
    assert_reaped(procs[0].pid)


async def test_agentrt_error_from_body_keeps_its_code() -> None:
    with pytest.raises(AgentrtError) as info:
        async with open_process(fixture("normal")):
            raise AgentrtError("some_code", "d")
    assert info.value.code == "some_code"


# --- process group --------------------------------------------------------------------

GRANDCHILD = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "subprocess.Popen([sys.executable, '-S', '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    'print("ready", flush=True); time.sleep(120)\'])\n'
    "{leader}\n"
)


async def test_sigkill_reaches_grandchildren_of_a_hung_leader() -> None:
    spec = py(GRANDCHILD.format(leader="time.sleep(120)"), shutdown_grace=0.05, term_grace=0.1)
    async with open_process(spec) as proc:
        await wait_ready(proc)  # printed by the grandchild: both now ignore SIGTERM
        status = await proc.stop()
        assert status.signal == signal.SIGKILL
        # The grandchild holds stdout too: EOF proves it is gone.
        assert await read_to_eof(proc, limit=5) == b""


async def test_leftover_grandchild_of_an_exited_leader_is_killed_on_stop() -> None:
    spec = py(GRANDCHILD.format(leader="sys.exit(0)"))
    async with open_process(spec) as proc:
        await wait_ready(proc)
        with trio.fail_after(10):
            await proc.wait()
        status = await proc.stop()
        assert status.kind == "exited"  # it had already exited by itself
        assert await read_to_eof(proc, limit=5) == b""


# --- stderr ---------------------------------------------------------------------------


async def test_stderr_ring_buffer_is_bounded_and_keeps_the_end() -> None:
    limit = 64 * 1024
    spec = fixture("stderr", "--stderr-bytes", str(1024 * 1024), stderr_limit=limit)
    async with open_process(spec) as proc:
        await proc.close_stdin()
        with trio.fail_after(10):
            await proc.wait()
    kept = proc.stderr_tail(10**9)
    assert limit // 2 <= len(kept) <= limit
    assert kept.endswith(b"END\n")
    assert proc.stderr_tail(4) == b"END\n"
    assert proc.stderr_tail(0) == b""


# --- stdin ----------------------------------------------------------------------------


async def test_send_after_exit_is_stdin_unavailable() -> None:
    async with open_process(py("pass")) as proc:
        with trio.fail_after(10):
            await proc.wait()
        with pytest.raises(AgentrtError) as info:
            # The first write may land in the pipe buffer before EPIPE is seen;
            # a few writes bound that (each is one attempt, never retried).
            for _ in range(100):
                await proc.send(b"x" * 65536)
        assert info.value.code == "stdin_unavailable"


async def test_send_after_close_and_after_stop() -> None:
    async with open_process(fixture("normal")) as proc:
        await proc.close_stdin()
        await proc.close_stdin()  # idempotent
        with pytest.raises(AgentrtError) as info:
            await proc.send(USER_LINE)
        assert info.value.code == "stdin_unavailable"
        await proc.stop()
        with pytest.raises(AgentrtError):
            await proc.send(USER_LINE)


async def test_no_stdin_means_dev_null() -> None:
    spec = py("import sys; print(repr(sys.stdin.read()))", stdin=False)
    async with open_process(spec) as proc:
        out = await read_to_eof(proc)
        with pytest.raises(AgentrtError) as info:
            await proc.send(b"x\n")
        assert info.value.code == "stdin_unavailable"
    assert out.strip() == b"''"


# --- spawn failures -------------------------------------------------------------------


async def spawn_error(spec: ProcessSpec) -> AgentrtError:
    with pytest.raises(AgentrtError) as info:
        async with open_process(spec):
            pytest.fail("should not start")
    assert info.value.code == "spawn_failed"
    return info.value


async def test_spawn_failures(tmp_path: pathlib.Path) -> None:
    err = await spawn_error(ProcessSpec(argv=(str(tmp_path / "missing"),), env=ENV))
    assert "ENOENT" in err.detail
    noexec = tmp_path / "noexec"
    noexec.write_text("#!/bin/sh\n")
    noexec.chmod(0o644)
    if os.geteuid() != 0:
        assert "EACCES" in (await spawn_error(ProcessSpec(argv=(str(noexec),), env=ENV))).detail
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF-not-really")
    garbage.chmod(0o755)
    assert "ENOEXEC" in (await spawn_error(ProcessSpec(argv=(str(garbage),), env=ENV))).detail
    await spawn_error(ProcessSpec(argv=("python3", "-c", "pass"), env=ENV))
    await spawn_error(ProcessSpec(argv=(), env=ENV))
    await spawn_error(py("pass", cwd=str(tmp_path / "no-such-dir")))


async def test_spawn_failure_never_shows_env_values(tmp_path: pathlib.Path) -> None:
    env = {**ENV, "OPENAI_API_KEY": "sk-secret", "BAD": "nul\x00inside"}
    err = await spawn_error(ProcessSpec(argv=(sys.executable, "-c", "pass"), env=env))
    assert "sk-secret" not in str(err) and "nul" not in str(err)


# --- environment and argv reach the child exactly -------------------------------------


class _Plain(Dialect):
    name = "awp-jsonl"

    def host_codec(self) -> HostCodec:
        raise NotImplementedError

    def agent_codec(self) -> AgentCodec:
        raise NotImplementedError


async def test_secrets_in_the_parent_env_never_reach_the_child(tmp_path: pathlib.Path) -> None:
    parent = {
        **os.environ,
        "OPENAI_API_KEY": "sk-secret",
        "AWP_SECRET_TOKEN": "tok-secret",
        "AWP_AGENT_CLI_EXECUTABLE": write_fixture_agent(tmp_path, "env-dump"),
        "AWP_AGENT_CLI_ENV_JSON": json.dumps({"FOO": "bar", "AGENT_URL": "http://127.0.0.1:9/v1"}),
        "ANTHROPIC_BASE_URL": "https://api.example.com",
        "HOME": "/home/fixture",
    }
    launch = LaunchSpec.from_env(parent)
    spec = launch.process_spec(_Plain(), parent_env=parent, cwd=tmp_path)
    async with open_process(spec) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    dumped = next(o["env"] for o in objs if o.get("type") == "fixture_env")
    expected = {k: parent[k] for k in SAFE_ENV_KEYS if k in parent}
    expected.update(FOO="bar", AGENT_URL="http://127.0.0.1:9/v1")
    # The only variable the child's Python may add itself is PEP 538's LC_CTYPE coercion.
    extra = {k: v for k, v in dumped.items() if k not in expected}
    assert extra in ({}, {"LC_CTYPE": "C.UTF-8"})
    assert {k: v for k, v in dumped.items() if k in expected} == expected
    assert dumped["FOO"] == "bar" and dumped["HOME"] == "/home/fixture"
    for key, value in dumped.items():
        assert not any(word in key.upper() for word in ("TOKEN", "API_KEY", "BASE_URL")), key
        assert "secret" not in value
    assert objs[1]["cwd"] == str(tmp_path)


async def test_argv_reaches_the_child_exactly(tmp_path: pathlib.Path) -> None:
    exe = write_fixture_agent(tmp_path, "argv-dump")
    launch = LaunchSpec.from_env(
        {
            "AWP_AGENT_CLI_EXECUTABLE": exe,
            "AWP_AGENT_CLI_ARGS_JSON": '["--deltas", "3"]',
            "AWP_AGENT_DEFAULT_MODEL": "model with spaces; $(rm -rf /)",
        }
    )
    spec = launch.process_spec(_Plain(), resume="sess.1", mcp_config="/tmp/x y.json", parent_env=ENV)
    async with open_process(spec) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    argv = next(o["argv"] for o in objs if o.get("type") == "fixture_argv")
    # write_fixture_agent's script inserts "--mode argv-dump" first.
    assert argv == [
        "--mode",
        "argv-dump",
        "--deltas",
        "3",
        "--model",
        "model with spaces; $(rm -rf /)",
        "--resume",
        "sess.1",
        "--mcp-config",
        "/tmp/x y.json",
    ]
    init = next(o for o in objs if o.get("subtype") == "init")
    assert init["session_id"] == "sess.1" and init["model"] == "model with spaces; $(rm -rf /)"
    assert sum(o["type"] == "content_block_delta" for o in objs) == 3


# --- fixture agent modes through the real pipe ----------------------------------------


async def test_flood_hits_the_cap_without_reading_it_all() -> None:
    reader = JsonlReader()
    total = 0
    async with open_process(fixture("flood", shutdown_grace=0.05)) as proc:
        await proc.send(USER_LINE)
        with pytest.raises(OutputOversize), trio.fail_after(10):
            while chunk := await proc.receive_some():
                total += len(chunk)
                reader.feed(chunk)
        status = await proc.stop()
    assert total <= 4 * 1024 * 1024 + READ_SIZE
    assert status.kind == "requested"


async def test_split_mode_reassembles() -> None:
    async with open_process(fixture("split")) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    assert objs[0]["type"] == "system" and len(objs) == 6


async def test_malformed_mode_counts_and_continues() -> None:
    async with open_process(fixture("malformed")) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    bad = [o for o in objs if isinstance(o, Malformed)]
    assert [m.count for m in bad] == [1, 2, 3]
    assert bad[0].head == b"this is not json"
    assert is_result(objs[-1])


async def test_exit_mid_turn_mode() -> None:
    async with open_process(fixture("exit-mid-turn")) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
        status = await proc.wait()
    assert not any(is_result(o) for o in objs)
    assert objs[-1]["type"] == "content_block_delta"
    assert (status.returncode, status.kind) == (3, "crashed")


async def test_output_before_input_mode() -> None:
    async with open_process(fixture("output-before-input")) as proc:
        objs = await read_until(proc, Reader(), lambda o: True)
    assert objs[0]["subtype"] == "init"


async def test_bad_session_id_mode_and_resume_echo() -> None:
    async with open_process(fixture("bad-session-id")) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    assert objs[0]["session_id"] == "not a valid id!"
    async with open_process(fixture("normal", "--resume", "abc:1")) as proc:
        await proc.send(USER_LINE)
        await proc.send(USER_LINE)
        reader = Reader()
        first = await read_until(proc, reader, is_result)
        second = await read_until(proc, reader, is_result)
    assert first[0]["session_id"] == "abc:1"
    assert second[0]["type"] == "content_block_start"  # init on the first turn only
    assert second[-1]["usage"]["input_tokens"] == 20


async def test_shutdown_line_ends_the_fixture_with_code_zero() -> None:
    async with open_process(fixture("normal", shutdown_line=SHUTDOWN)) as proc:
        await proc.send(SHUTDOWN)
        with trio.fail_after(10):
            status = await proc.wait()
    assert status.kind == "exited"


async def test_python_dash_m_entry_point() -> None:
    spec = ProcessSpec(
        argv=(sys.executable, "-m", "agentrt.testing.fixture_agent", "--mode", "normal"),
        env={**ENV, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    async with open_process(spec) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    assert objs[-1]["result"] == "echo: hello"


async def test_stop_while_a_send_is_blocked_on_a_full_pipe() -> None:
    # The child never reads stdin: a 4 MiB send blocks on the full pipe.  stop()
    # must not wait behind it: closing stdin fails the send, then SIGTERM ends the child.
    spec = py("import time; time.sleep(60)", shutdown_line=SHUTDOWN, shutdown_grace=0.05)
    errors: list[AgentrtError] = []
    async with open_process(spec) as proc:

        async def sender() -> None:
            try:
                await proc.send(b"x" * (4 << 20))
            except AgentrtError as exc:
                errors.append(exc)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                await trio.testing.wait_all_tasks_blocked()
                status = await proc.stop()
    assert [e.code for e in errors] == ["stdin_unavailable"]
    assert status.signal == signal.SIGTERM and status.kind == "requested"


async def test_stdout_eof_and_exit_are_both_observed() -> None:
    async with open_process(py("print('{\"a\": 1}')")) as proc:
        data = await read_to_eof(proc)
        with trio.fail_after(10):
            status = await proc.wait()
    assert data == b'{"a": 1}\n' and status.kind == "exited"


def test_process_spec_rejects_negative_bounds() -> None:
    with pytest.raises(ValueError):
        ProcessSpec(argv=("/bin/true",), env={}, term_grace=-1)
    with pytest.raises(ValueError):
        ProcessSpec(argv=("/bin/true",), env={}, shutdown_grace=-0.1)
    with pytest.raises(ValueError):
        ProcessSpec(argv=("/bin/true",), env={}, stderr_limit=0)


async def test_fixture_mode_from_the_environment(tmp_path: pathlib.Path) -> None:
    # The mode can come from AWP_AGENT_CLI_ENV_JSON too (here: --mode is not given).
    spec = ProcessSpec(
        argv=(sys.executable, "-S", fixture_agent_argv()[2]),
        env={**ENV, "AGENTRT_FIXTURE_MODE": "argv-dump"},
    )
    async with open_process(spec) as proc:
        await proc.send(USER_LINE)
        objs = await read_until(proc, Reader(), is_result)
    assert objs[0] == {"type": "fixture_argv", "argv": []}
