"""``bridge --to acp`` and ``agent --dialect acp`` that cannot start answer the client in JSON-RPC.

An ACP client sends ``initialize`` and waits for its answer: a stream-json
result line would be a parse error to it ("connection closed").  The first
request gets a JSON-RPC error whose message starts with the stable code
(``data.code`` carries it alone), stdout carries nothing else, and the
process exits 1.  Other dialects keep the one ``startup_error`` line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
BOUND = 60  # hang guard only
INIT = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}


def _run(argv: list[str], lines: list[dict[str, object]], tmp_path: Path) -> tuple[int, list[dict[str, object]]]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AGENTRT_CONFIG": str(tmp_path / "none.toml")}
    data = "".join(json.dumps(obj) + "\n" for obj in lines).encode()
    proc = subprocess.run([AGENTRT, *argv], input=data, capture_output=True, env=env, timeout=BOUND)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["bridge", "--to", "acp", "--", "AWP_AGENT_CLI_EXECUTABLE=/nonexistent/agent"], "cli_executable_not_found"),
        (["bridge", "--to", "acp", "--bogus"], "unsupported_argument:--bogus"),
        (["agent", "--dialect", "acp"], "model_required"),
    ],
    ids=["bridge-missing-executable", "bridge-bad-argument", "agent-no-model"],
)
def test_startup_error_is_the_json_rpc_answer_to_the_first_request(tmp_path: Path, argv: list[str], code: str) -> None:
    # A notification first: it gets no response; the request after it gets the error.
    status, out = _run(argv, [{"jsonrpc": "2.0", "method": "note"}, INIT], tmp_path)
    assert status == 1
    (answer,) = out
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 7 and "result" not in answer
    error = answer["error"]
    assert isinstance(error, dict) and error["code"] == -32603 and error["data"] == {"code": code}
    assert str(error["message"]).startswith(f"{code}: ") and len(str(error["message"])) > len(code) + 2


def test_no_request_before_end_of_input_prints_nothing(tmp_path: Path) -> None:
    status, out = _run(["bridge", "--to", "acp", "--bogus"], [], tmp_path)
    assert (status, out) == (1, [])


def test_other_dialects_keep_the_result_line(tmp_path: Path) -> None:
    status, out = _run(["bridge", "--to", "awp-jsonl", "--bogus"], [INIT], tmp_path)
    assert status == 1
    (line,) = out
    assert line["type"] == "result" and line["subtype"] == "startup_error"
    assert line["result"] == "unsupported_argument:--bogus"
