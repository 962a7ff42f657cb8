"""`agentrt chat` ends on SIGTERM (and SIGINT at a plain prompt) after the agent's bounded stop: 143 / 130.

Also: with stdout not a terminal, the banner and the usage footers go to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
SLOW_AGENT = Path(__file__).with_name("slow_agent.py")


def _agent_script(tmp: Path) -> str:
    path = tmp / "slow-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(SLOW_AGENT)!r}, run_name='__main__')\n")
    path.chmod(0o755)
    return str(path)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
    env.update(HOME=str(tmp), AWP_AGENT_CLI_EXECUTABLE=_agent_script(tmp), AWP_AGENT_CLI_PROTOCOL="awp-jsonl",
               AGENTRT_DATABASE_URL=f"sqlite://{tmp}/c.db", AGENTRT_LOAD_PLUGINS="awp-jsonl,sqlite,tui",
               AWP_AGENT_CLI_ENV_JSON=json.dumps({"SLOW_AGENT_PID_FILE": str(tmp / "agent.pids")}))
    return env


def _all_gone(tmp: Path) -> None:
    pids = [int(p) for p in (tmp / "agent.pids").read_text().split()]
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def _read_until(stream: trio.abc.ReceiveStream, text: bytes) -> bytes:
    seen = b""
    with trio.fail_after(30):  # a hang guard only
        while text not in seen:
            chunk = await stream.receive_some(65536)
            assert chunk, f"end of output before {text!r}: {seen[-2000:]!r}"
            seen += chunk
    return seen


async def _chat(tmp: Path) -> trio.Process:
    return await trio.lowlevel.open_process([AGENTRT, "chat"], env=_env(tmp), stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def _finish(proc: trio.Process) -> tuple[int, str]:
    assert proc.stderr is not None
    rest = b""
    with trio.fail_after(30):
        while chunk := await proc.stderr.receive_some(65536):
            rest += chunk
        code = await proc.wait()
    return code, rest.decode()


async def test_sigterm_mid_turn_stops_the_agent_and_exits_143(tmp_path: Path) -> None:
    proc = await _chat(tmp_path)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send_all(b"slow please\n")
        await _read_until(proc.stdout, b"tick 3 ")
        proc.send_signal(signal.SIGTERM)
        code, err = await _finish(proc)
        assert code == 143, err
        assert "agentrt: error: interrupted: SIGTERM received; the agent was stopped" in err
        assert "Traceback" not in err
        _all_gone(tmp_path)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_sigint_at_a_plain_prompt_exits_130(tmp_path: Path) -> None:
    proc = await _chat(tmp_path)
    try:
        assert proc.stderr is not None
        # The banner goes to stderr (stdout is a pipe): once it is there, the chat waits for a line.
        await _read_until(proc.stderr, b"/help for commands")
        proc.send_signal(signal.SIGINT)
        code, err = await _finish(proc)
        assert code == 130, err
        assert "interrupted: SIGINT received" in err and "Traceback" not in err
        _all_gone(tmp_path)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_banner_and_footer_go_to_stderr_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    done = subprocess.run([AGENTRT, "chat"], input="hi\n", capture_output=True, text=True, env=_env(tmp_path),
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "reply to: **hi**" in done.stdout
    assert "/help for commands" not in done.stdout and "/help for commands" in done.stderr
    assert " in · " not in done.stdout and "(7 in · 3 out · " in done.stderr
