"""The reference agent hosted as a stream-json CLI answers the SDK's control requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENTRT = str(Path(sys.executable).with_name("agentrt"))


def test_initialize_is_answered_before_any_turn(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AGENTRT_STATE_DIR": str(tmp_path / "state")}
    request = {"type": "control_request", "request_id": "req_1", "request": {"subtype": "initialize", "hooks": None}}
    proc = subprocess.run(
        [AGENTRT, "agent", "--dialect", "stream-json", "--model", "m"],
        input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=30, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["type"] == "control_response"
    assert lines[0]["response"]["subtype"] == "success"
    assert lines[0]["response"]["request_id"] == "req_1"
    # Nothing else: no init before a user turn.
    assert len(lines) == 1
