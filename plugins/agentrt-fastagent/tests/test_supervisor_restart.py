"""A real ``agentrt bots supervise`` process, SIGKILLed and started again, and its stop signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from agentrt.lowlevel import AgentProcess, JsonlReader, ProcessSpec, open_process
from agentrt_fastagent._procinfo import process_start_time

from .conftest import WAIT, make_binary
from .test_cli import AGENTRT, cli
from .test_cli import cli_env as cli_env  # a fixture, used by name

_PAUSE = [sys.executable, "-S", "-c", "import signal; signal.pause()"]


def _alive_with(needle: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds ``needle``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        if needle in cmd and stat[stat.rfind(b")") + 2 :][:1] != b"Z":
            out.append(int(name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] != b"Z"


class _Supervise:
    """Reads one ``agentrt bots supervise --json`` process's lines until a condition holds."""

    def __init__(self, proc: AgentProcess) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._reader = JsonlReader()

    async def until(self, cond: Callable[[dict[str, Any]], bool]) -> None:
        with trio.fail_after(WAIT * 3):
            while not any(cond(x) for x in self.lines):
                chunk = await self.proc.receive_some()
                assert chunk, self.proc.stderr_tail().decode()
                self.lines.extend(self._reader.feed(chunk))


def _state(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda x: x["event"]["type"] == "state_changed" and x["event"]["state"] == name


def _spec(env: dict[str, str]) -> ProcessSpec:
    return ProcessSpec(argv=(AGENTRT, "bots", "supervise", "--json"), env=env, stdin=False, term_grace=10)


async def test_sigkilled_supervisor_restart_leaves_one_bot_and_spares_a_claimed_pid(
    cli_env: dict[str, str],
    tmp_path: Path,
) -> None:
    decoy = subprocess.Popen(_PAUSE)
    try:
        binary = make_binary(tmp_path / "claimer", "claims_pid", claim_pid=decoy.pid)
        env = {**cli_env, "FASTAGENT_BINARY_PATH": str(binary)}
        assert cli(env, "add", "b1", "--start").returncode == 0
        async with open_process(_spec(env)) as proc:
            await _Supervise(proc).until(_state("running"))
            proc.send_signal(signal.SIGKILL)  # its group only: the bot has a session of its own
            assert (await proc.stop()).signal == signal.SIGKILL
        async with open_process(_spec(env)) as proc:
            await _Supervise(proc).until(_state("running"))
            # exactly one bot process: the recorded one was stopped before this one started
            assert len(_alive_with(str(binary))) == 1
            assert decoy.poll() is None  # the pid the bot claimed was never signalled
            proc.send_signal(signal.SIGTERM)
            assert (await proc.stop()).returncode == 143, proc.stderr_tail().decode()
        assert _alive_with(str(binary)) == []  # and the bounded stop took it down
    finally:
        decoy.kill()
        decoy.wait()


async def test_restart_after_sigkill_sweeps_the_bots_process_group(
    cli_env: dict[str, str],
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "helper.pid"
    binary = make_binary(tmp_path / "helper", "helper_in_group", pidfile=str(pidfile))
    env = {**cli_env, "FASTAGENT_BINARY_PATH": str(binary)}
    assert cli(env, "add", "b1", "--start").returncode == 0
    helpers: list[int] = []
    started: list[str | None] = []
    try:
        async with open_process(_spec(env)) as proc:
            await _Supervise(proc).until(_state("running"))
            helpers.append(int(pidfile.read_text()))
            started.append(process_start_time(helpers[0]))
            proc.send_signal(signal.SIGKILL)
            await proc.stop()
        async with open_process(_spec(env)) as proc:
            sup = _Supervise(proc)
            await sup.until(_state("running"))
            # the recorded group was swept before the new start: the old helper is gone
            assert not _alive(helpers[0])
            helpers.append(int(pidfile.read_text()))
            started.append(process_start_time(helpers[1]))
            proc.send_signal(signal.SIGINT)
            assert (await proc.stop()).returncode == 130, proc.stderr_tail().decode()
    finally:
        for pid, when in zip(helpers, started, strict=False):
            if when is not None and process_start_time(pid) == when:  # still that helper: ours to kill
                os.kill(pid, signal.SIGKILL)
