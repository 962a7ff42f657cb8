"""`agentrt run` as a real subprocess against fixture agents with real process trees:
a grandchild holding stdout, and the owner being signalled or SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentrt.lowlevel import DEATH_SIGNAL_SUPPORTED
from agentrt.testing._pids import PidWatch

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
linux_only = pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="pidfds and the death signal are Linux-only")

PRELUDE = f"""#!{sys.executable} -S
import json, os, subprocess, sys, time
def emit(o):
    sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()
def text(t):
    emit({{"type": "content_block_delta", "index": 0, "delta": {{"type": "text_delta", "text": t}}}})
sys.stdin.readline()
emit({{"type": "system", "subtype": "init", "session_id": "s-tree", "model": "m"}})
"""

# Starts a helper that inherits stdout (as an MCP server would), names it, and exits mid-turn.
GRANDCHILD = PRELUDE + """
helper = subprocess.Popen([sys.executable, "-S", "-c", "import time\\nwhile True: time.sleep(3600)"])
text(f"{helper.pid}\\n")
os._exit(4)
"""

# Names itself, then never ends the turn (and ignores EOF on stdin: only a signal stops it).
HANGS = PRELUDE + """
text(f"{os.getpid()}\\n")
while True:
    time.sleep(3600)
"""


def _agent(tmp_path: Path, body: str) -> str:
    path = tmp_path / "agent"
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


def _start(exe: str) -> subprocess.Popen[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AWP_AGENT_CLI_EXECUTABLE": exe}
    return subprocess.Popen(
        [AGENTRT, "run", "hi"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )


@linux_only
def test_run_ends_when_the_agent_exits_while_a_grandchild_holds_stdout(tmp_path: Path) -> None:
    run = _start(_agent(tmp_path, GRANDCHILD))
    assert run.stdout is not None
    helper = PidWatch(int(run.stdout.readline()))
    with helper:
        try:
            _, err = run.communicate(timeout=60)  # hang guard: today `agentrt run` never returns
        finally:
            run.kill()
            run.wait()
        assert run.returncode == 3, err
        assert err.startswith("agentrt: error: exit_before_result: ") and "code=4" in err
        assert helper.gone(30), "the grandchild survived the turn"


@linux_only
def test_sigkill_of_agentrt_run_takes_the_agent_down(tmp_path: Path) -> None:
    run = _start(_agent(tmp_path, HANGS))
    assert run.stdout is not None
    with PidWatch(int(run.stdout.readline())) as agent:
        run.kill()
        run.communicate(timeout=60)
        assert agent.gone(30), "the agent outlived its SIGKILLed owner"


@linux_only
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_stop_the_agent_and_exit_128_plus_signal(
    tmp_path: Path, signum: int, status: int
) -> None:
    run = _start(_agent(tmp_path, HANGS))
    assert run.stdout is not None
    with PidWatch(int(run.stdout.readline())) as agent:
        run.send_signal(signum)
        _, err = run.communicate(timeout=60)
        assert run.returncode == status, err
        assert f"interrupted: {signal.Signals(signum).name}" in err
        assert "Traceback" not in err
        # The bounded stop ran before the exit: the agent is already gone.
        assert agent.gone(0)
