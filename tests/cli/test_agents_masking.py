"""``agentrt agents show`` and ``agents list --json`` mask secrets in args, env and rules (issue 28.9).

Real parts: the ``agentrt`` CLI as a subprocess reading a real config file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
SECRETS = (
    "sk-ant-abcdefghijklmnop",
    "hunter2",
    "plain-but-named",
    "eq-value-1",
    "abcdefghijkl0123",
    "ghp_0123456789abcdef",
)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AGENTRT_CONFIG": str(tmp_path / "config.toml"),
    }
    return subprocess.run(
        [AGENTRT, *args], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_show_and_list_mask_args_env_and_rules(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[agents.fx]\n"
        'executable = "/bin/true"\n'
        'args = ["--api-key", "sk-ant-abcdefghijklmnop", "--endpoint", "https://me:hunter2@api.example.com/v1",'
        ' "--client-secret", "plain-but-named", "--auth-token=eq-value-1", "--max-tokens", "4096"]\n'
        'env = { HEADER = "Bearer abcdefghijkl0123", PLAIN = "visible", GH = "ghp_0123456789abcdef" }\n'
        'permissions = { mode = "ask", allow = ["Read", "Bash(git status:*)"] }\n'
    )
    shown = _cli(tmp_path, "agents", "show", "fx")
    as_json = _cli(tmp_path, "agents", "show", "fx", "--json")
    listed = _cli(tmp_path, "agents", "list", "--json")
    for proc in (shown, as_json, listed):
        assert proc.returncode == 0, proc.stderr
        for secret in SECRETS:
            assert secret not in proc.stdout + proc.stderr, (proc.args, secret)
    (info,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert info == json.loads(as_json.stdout)
    assert info["args"] == [
        "--api-key", "****", "--endpoint", "https://****@api.example.com/v1",
        "--client-secret", "****", "--auth-token=****", "--max-tokens", "4096",
    ]  # fmt: skip
    assert info["env"] == {"HEADER": "Bearer ****", "PLAIN": "visible", "GH": "****"}
    assert info["permissions"] == {"mode": "ask", "allow": ["Read", "Bash(git status:*)"], "deny": []}
    assert "env:        PLAIN=visible" in shown.stdout
    assert "permissions: mode=ask allow=['Read', 'Bash(git status:*)'] deny=[]" in shown.stdout
