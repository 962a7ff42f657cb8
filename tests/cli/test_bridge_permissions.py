"""``agentrt bridge -a NAME`` enforces the named agent's ``permissions``, as ``run`` does (issue 28).

Real parts: the bridge is a real subprocess hosting the stream-json fixture
agent (``agentrt_stream_json.fixture_agent``, mode ``permission``: it
asks ``can_use_tool`` for ``Bash {command: echo hi}`` and says what it got)
named in a real config file.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..plugin_data import STREAM_JSON_AGENT

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = STREAM_JSON_AGENT
BOUND = 60  # hang guard only


def _bridge(tmp_path: Path, permissions: str, *flags: str, answer: bool = False) -> list[dict[str, Any]]:
    """Every line the bridge wrote for one turn; ``answer``: allow what the bridge asks (else end the input)."""
    exe = tmp_path / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[agents.fx]\nexecutable = "{exe}"\nprotocol = "stream-json"\n'
        'env = { STREAM_JSON_FIXTURE_MODE = "permission" }\n'
        f"permissions = {permissions}\n"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "AGENTRT_CONFIG": str(config)}
    user = {"type": "user", "message": {"role": "user", "content": "run it"}}
    proc = subprocess.Popen(
        [AGENTRT, "bridge", "--to", "stream-json", "-a", "fx", *flags],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(user) + "\n")
    proc.stdin.flush()
    lines: list[dict[str, Any]] = []
    if answer:
        for raw in proc.stdout:
            lines.append(json.loads(raw))
            if lines[-1].get("type") == "control_request":
                asked = lines[-1]["request"]
                allow = {"behavior": "allow", "updatedInput": asked["input"]}
                reply = {"subtype": "success", "request_id": lines[-1]["request_id"], "response": allow}
                proc.stdin.write(json.dumps({"type": "control_response", "response": reply}) + "\n")
                proc.stdin.flush()
                break
    out, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    return lines + [json.loads(line) for line in out.splitlines()]


def _result(lines: list[dict[str, Any]]) -> str:
    (result,) = [o for o in lines if o.get("type") == "result"]
    return str(result["result"])


def _asked(lines: list[dict[str, Any]]) -> bool:
    return any(o.get("type") == "control_request" for o in lines)


@pytest.mark.parametrize("flags", [(), ("--permission-prompt-tool", "stdio")], ids=["no-client-ask", "client-asks"])
def test_an_allow_rule_of_the_named_agent_allows_without_asking(tmp_path: Path, flags: tuple[str, ...]) -> None:
    lines = _bridge(tmp_path, '{ allow = ["Bash(echo hi)"] }', *flags)
    assert _result(lines) == "allowed:echo hi"
    assert not _asked(lines)


@pytest.mark.parametrize("flags", [(), ("--permission-prompt-tool", "stdio")], ids=["no-client-ask", "client-asks"])
def test_a_deny_rule_of_the_named_agent_denies_without_asking(tmp_path: Path, flags: tuple[str, ...]) -> None:
    lines = _bridge(tmp_path, '{ mode = "allow", allow = ["Bash"], deny = ["Bash(echo:*)"] }', *flags)
    assert _result(lines) == "denied:agentrt: denied (rule:config deny Bash(echo:*))"
    assert not _asked(lines)


def test_the_named_agents_mode_decides_what_no_rule_matches(tmp_path: Path) -> None:
    assert _result(_bridge(tmp_path, '{ mode = "allow" }')) == "allowed:echo hi"
    assert _result(_bridge(tmp_path, '{ mode = "deny", allow = ["Read"] }')).startswith("denied:agentrt: denied")


def test_what_the_rules_leave_open_still_goes_to_the_client(tmp_path: Path) -> None:
    lines = _bridge(tmp_path, '{ mode = "ask", allow = ["Read"] }', "--permission-prompt-tool", "stdio", answer=True)
    assert _asked(lines)
    assert _result(lines) == "allowed:echo hi"  # the client's answer
