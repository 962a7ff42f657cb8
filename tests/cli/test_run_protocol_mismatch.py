"""A wrong protocol fails fast: `agentrt run` with fixture agents of each dialect launched under another one.

Lines of another known dialect fail the turn `protocol_mismatch` at once (these tests turn the first-output
bound off, so only the lines can end the turn); an agent that writes nothing the dialect recognises fails
it after the bound.  Either way the message names the dialect the agent looks like and the setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..plugin_data import ACP_AGENT, CLAUDE_CODE_CAPTURES, STREAM_JSON_AGENT

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
CAPTURE = CLAUDE_CODE_CAPTURES / "basic_two_turns.stdout.jsonl"
COMPAT = ["--output-format", "stream-json", "--input-format", "stream-json", "--print", "--verbose"]

AWP_AGENT = """
import json, sys
for line in sys.stdin:
    sys.stdout.write(json.dumps({"type": "system", "subtype": "init", "session_id": "awp-1", "model": "m"}) + "\\n")
    sys.stdout.flush()
"""

JSONRPC_AGENT = """
import json, sys
for line in sys.stdin:
    error = {"code": -32600, "message": "Invalid Request"}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}) + "\\n")
    sys.stdout.flush()
"""


def _script(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return str(path)


def _runpy(tmp: Path, name: str, target: Path) -> str:
    return _script(tmp, name, f"import runpy\nrunpy.run_path({str(target)!r}, run_name='__main__')\n")


def _run(tmp: Path, exe: str, protocol: str, bound: str, *, args: list[str] | None = None,
         child_env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]], str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp),
        "XDG_DATA_HOME": str(tmp), "AWP_AGENT_CLI_EXECUTABLE": exe, "AWP_AGENT_CLI_PROTOCOL": protocol,
        "AWP_AGENT_CLI_ARGS_JSON": json.dumps(args or []), "AWP_AGENT_CLI_ENV_JSON": json.dumps(child_env or {}),
        "AGENTRT_FIRST_OUTPUT_TIMEOUT": bound,
    }
    # The timeout is a hang guard: with the bound off, a missed mismatch would hang here.
    done = subprocess.run([AGENTRT, "run", "--json", "--no-log", "hi"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def _mismatch(status: int, events: list[dict[str, Any]], err: str) -> str:
    assert status == 3, err
    terminals = [e for e in events if e["type"] in ("turn_completed", "turn_failed")]
    assert [t["code"] for t in terminals] == ["protocol_mismatch"], events
    assert events[-1]["type"] == "process_exited" and events[-1]["requested"], "the agent is stopped"
    assert f"agentrt: error: protocol_mismatch: {terminals[0]['message']}" in err
    message: str = terminals[0]["message"]
    return message


def test_claude_code_output_under_awp_jsonl_names_stream_json(tmp_path: Path) -> None:
    exe = _runpy(tmp_path, "claude", STREAM_JSON_AGENT)
    message = _mismatch(*_run(tmp_path, exe, "awp-jsonl", "0", args=COMPAT,
                              child_env={"STREAM_JSON_FIXTURE_CAPTURE": str(CAPTURE)}))
    assert message.startswith("the agent's output looks like stream-json (Claude Code's system/init line), "
                              "not awp-jsonl: set the agent's protocol to stream-json (--protocol stream-json")
    assert "AWP_AGENT_CLI_PROTOCOL=stream-json" in message


def test_json_rpc_under_awp_jsonl_names_acp(tmp_path: Path) -> None:
    exe = _script(tmp_path, "agent", JSONRPC_AGENT)
    message = _mismatch(*_run(tmp_path, exe, "awp-jsonl", "0"))
    assert message.startswith("the agent's output looks like acp (JSON-RPC messages), not awp-jsonl: "
                              "set the agent's protocol to acp (--protocol acp")


def test_awp_jsonl_output_under_acp_names_awp_jsonl(tmp_path: Path) -> None:
    exe = _script(tmp_path, "agent", AWP_AGENT)
    message = _mismatch(*_run(tmp_path, exe, "acp", "0"))
    assert message.startswith("the agent's output looks like awp-jsonl (a system line), not acp: "
                              "set the agent's protocol to awp-jsonl (--protocol awp-jsonl")


@pytest.mark.parametrize("protocol", ["awp-jsonl", "stream-json"])
def test_a_silent_acp_agent_fails_after_the_bound(tmp_path: Path, protocol: str) -> None:
    exe = _runpy(tmp_path, "acp-agent", ACP_AGENT)
    args = COMPAT if protocol == "stream-json" else []
    message = _mismatch(*_run(tmp_path, exe, protocol, "1", args=args))
    assert message.startswith(f"the agent wrote nothing {protocol} recognises within 1 s of the prompt; "
                              "by its name it may speak acp: set the agent's protocol to acp (--protocol acp")
    assert message.endswith("can be given longer with the config key agents.<name>.first_output_timeout"
                            " or, for one command, AGENTRT_FIRST_OUTPUT_TIMEOUT")


def test_a_stream_json_agent_silent_under_acp_fails_after_the_bound(tmp_path: Path) -> None:
    exe = _runpy(tmp_path, "claude", STREAM_JSON_AGENT)
    message = _mismatch(*_run(tmp_path, exe, "acp", "1", args=COMPAT, child_env={"STREAM_JSON_FIXTURE_MODE": "stall"}))
    assert "by its name it may speak stream-json: set the agent's protocol to stream-json" in message


def test_a_bad_bound_is_a_usage_error(tmp_path: Path) -> None:
    exe = _script(tmp_path, "agent", AWP_AGENT)
    status, events, err = _run(tmp_path, exe, "awp-jsonl", "soon")
    assert status == 2 and events == []
    assert "agentrt: error: invalid_first_output_timeout: AGENTRT_FIRST_OUTPUT_TIMEOUT must be a number" in err
