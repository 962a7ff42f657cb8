"""Ctrl-C, SIGTERM and --timeout in `agentrt run`: the turn ends through its dialect, with one terminal event.

Each test runs `agentrt run --json` as a real subprocess against a fixture agent of one dialect, waits for
the agent's first words on stdout, then sends real signals.  The conversation log (the sqlite recorder)
must say how the turn ended, as the event stream does.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..plugin_data import ACP_AGENT, STREAM_JSON_AGENT

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
GUARD = 60.0  # a hang guard only: every wait below ends on output

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="process groups and signals as on Linux")

AWP_WORKING = """
import json, sys
def out(obj):
    sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "shutdown":
        break
    out({"type": "system", "subtype": "init", "session_id": "awp-1", "model": "m"})
    out({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    out({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "working"}})
"""


def _script(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return str(path)


def _runpy(tmp: Path, name: str, target: Path) -> str:
    return _script(tmp, name, f"import runpy\nrunpy.run_path({str(target)!r}, run_name='__main__')\n")


class Run:
    """`agentrt run --json` in a subprocess; its stdout read as events, line by line."""

    def __init__(self, tmp: Path, exe: str, protocol: str, *args: str, child_env: dict[str, str] | None = None,
                 cwd: Path | None = None):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp),
            "XDG_DATA_HOME": str(tmp), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/log.db",
            "AWP_AGENT_CLI_EXECUTABLE": exe, "AWP_AGENT_CLI_PROTOCOL": protocol,
            "AWP_AGENT_CLI_ENV_JSON": json.dumps(child_env or {}),
        }
        self.tmp = tmp
        self.proc = subprocess.Popen(
            [AGENTRT, "run", "--json", *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=cwd,
        )
        self.events: list[dict[str, Any]] = []  # every event printed so far
        self._looked = 0  # events wait_for has already looked at
        self._pending = b""

    def _take(self, data: bytes) -> None:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        self.events.extend(json.loads(line) for line in lines if line.strip())

    def wait_for(self, test: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """Read events until one not looked at yet passes ``test``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + GUARD
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                while self._looked < len(self.events):
                    ev = self.events[self._looked]
                    self._looked += 1
                    if test(ev):
                        return ev
                left = deadline - time.monotonic()
                assert left > 0, f"no {what} within the hang guard; events: {self.events}"
                if sel.select(left):
                    data = os.read(fd, 65536)
                    assert data, f"stdout ended before {what}; events: {self.events}"
                    self._take(data)

    def text(self, text: str) -> None:
        self.wait_for(lambda e: e["type"] == "text_delta" and text in e["text"], f"the text {text!r}")

    def finish(self) -> tuple[int, list[dict[str, Any]], str]:
        """Exit status, every event printed, stderr."""
        out, err = self.proc.communicate(timeout=GUARD)
        self._take(out + b"\n")
        return self.proc.returncode, self.events, err.decode()

    def recorded(self) -> list[tuple[str, str | None]]:
        """(outcome, code) of each turn the conversation log holds."""
        with sqlite3.connect(self.tmp / "log.db") as db:
            return list(db.execute("SELECT outcome, code FROM turns ORDER BY id"))


def _terminals(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in ("turn_completed", "turn_failed")]


def _one_cancelled(status: int, events: list[dict[str, Any]], err: str, signum: int = signal.SIGINT) -> dict[str, Any]:
    assert status == 128 + signum, err
    terminals = _terminals(events)
    assert [t["code"] for t in terminals] == ["turn_cancelled"], events
    assert f"interrupted: {signal.Signals(signum).name}" in err and "Traceback" not in err
    return terminals[0]


@linux_only
def test_ctrl_c_interrupts_a_stream_json_agent_which_ends_the_turn_itself(tmp_path: Path) -> None:
    exe = _runpy(tmp_path, "claude", STREAM_JSON_AGENT)
    run = Run(tmp_path, exe, "stream-json", "hi", child_env={"STREAM_JSON_FIXTURE_MODE": "stall"})
    run.text("working")
    run.proc.send_signal(signal.SIGINT)
    terminal = _one_cancelled(*run.finish())
    # The agent's own answer to the interrupt (error_during_execution) ended the turn, not a stop.
    assert "the agent said" in terminal["message"], terminal
    assert run.recorded() == [("failed", "turn_cancelled")]


@linux_only
def test_ctrl_c_sends_session_cancel_to_an_acp_agent(tmp_path: Path) -> None:
    exe = _runpy(tmp_path, "acp-agent", ACP_AGENT)
    run = Run(tmp_path, exe, "acp", "wait")
    run.text("waiting")
    run.proc.send_signal(signal.SIGINT)
    terminal = _one_cancelled(*run.finish())
    # Its prompt response, stopReason cancelled, ended the turn.
    assert terminal["message"] == "the agent stopped the turn (cancelled)", terminal
    assert run.recorded() == [("failed", "turn_cancelled")]


@linux_only
def test_ctrl_c_stops_an_awp_jsonl_agent_which_has_no_interrupt(tmp_path: Path) -> None:
    exe = _script(tmp_path, "awp-agent", AWP_WORKING)
    run = Run(tmp_path, exe, "awp-jsonl", "hi")
    run.text("working")
    run.proc.send_signal(signal.SIGINT)
    status, events, err = run.finish()
    terminal = _one_cancelled(status, events, err)
    assert terminal["message"] == "the turn was cancelled"
    # Its bounded stop: the shutdown line, which this agent obeys.
    assert events[-1] == {"type": "process_exited", "returncode": 0, "signal": None, "requested": True}
    assert run.recorded() == [("failed", "turn_cancelled")]


@linux_only
def test_a_second_ctrl_c_kills_an_agent_that_ignores_the_interrupt_at_once(tmp_path: Path) -> None:
    marker = tmp_path / "stdin-closed"
    exe = _runpy(tmp_path, "claude", STREAM_JSON_AGENT)
    run = Run(tmp_path, exe, "stream-json", "hi",
              child_env={"STREAM_JSON_FIXTURE_MODE": "deaf", "STREAM_JSON_FIXTURE_MARKER": str(marker)})
    run.text("working")
    run.proc.send_signal(signal.SIGINT)
    run.text("not stopping")  # the interrupt arrived and was ignored: agentrt now waits for its grace
    run.proc.send_signal(signal.SIGINT)
    status, events, err = run.finish()
    _one_cancelled(status, events, err)
    # Killed at once: the bounded stop (which closes stdin first) never got to it.
    assert not marker.exists()
    assert events[-1]["type"] == "process_exited" and events[-1]["signal"] == signal.SIGKILL
    assert run.recorded() == [("failed", "turn_cancelled")]


@linux_only
def test_sigterm_ends_the_turn_with_one_terminal_event(tmp_path: Path) -> None:
    exe = _runpy(tmp_path, "claude", STREAM_JSON_AGENT)
    run = Run(tmp_path, exe, "stream-json", "hi", child_env={"STREAM_JSON_FIXTURE_MODE": "stall"})
    run.text("working")
    run.proc.send_signal(signal.SIGTERM)
    terminal = _one_cancelled(*run.finish(), signum=signal.SIGTERM)
    assert terminal["message"] == "the turn was cancelled"  # stopped, not asked
    assert run.recorded() == [("failed", "turn_cancelled")]


@linux_only
@pytest.mark.parametrize("protocol", ["awp-jsonl", "stream-json"])
def test_timeout_is_one_turn_timeout_recorded_as_such(tmp_path: Path, protocol: str) -> None:
    if protocol == "awp-jsonl":
        exe = _script(tmp_path, "awp-agent", AWP_WORKING)
    else:
        exe = _runpy(tmp_path, "claude", STREAM_JSON_AGENT)
    run = Run(tmp_path, exe, protocol, "--timeout", "1", "hi", child_env={"STREAM_JSON_FIXTURE_MODE": "stall"})
    status, events, err = run.finish()
    assert status == 3, err
    assert [(t["type"], t["code"]) for t in _terminals(events)] == [("turn_failed", "turn_timeout")], events
    assert "agentrt: error: turn_timeout: no result within 1 s; the agent was stopped" in err
    assert run.recorded() == [("failed", "turn_timeout")]
