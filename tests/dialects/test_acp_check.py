"""``agentrt check --protocol acp``: ACP's own clauses, reported by name.

Against real peers (the TypeScript SDK's example agent from ``.peers/``, the
Python SDK's example agent from its sdist) and a standard-library fixture agent
(``fixtures/acp_raw_agent.py``) that breaks one clause per mode.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENTRT = str(Path(sys.executable).with_name("agentrt"))
RAW_AGENT = Path(__file__).parent / "fixtures" / "acp_raw_agent.py"
TS_AGENT = ROOT / ".peers" / "node_modules" / "@agentclientprotocol" / "sdk" / "dist" / "examples" / "agent.js"
ACP_CLAUSES = [
    "acp_initialize_answered",
    "acp_one_response_per_prompt",
    "acp_updates_for_known_sessions",
    "acp_cancel_honoured",
]


def _script(tmp_path: Path, name: str, target: Path) -> str:
    # The launch contract wants a regular, non-symlink executable: a script naming the interpreter.
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(target)!r}, run_name='__main__')\n")
    path.chmod(stat.S_IRWXU)
    return str(path)


def _check(tmp_path: Path, **env: str) -> tuple[int, dict[str, dict[str, Any]]]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8", **env}
    proc = subprocess.run(
        [AGENTRT, "check", "--protocol", "acp", "--json", "--turn-timeout", "60"],
        env=base,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    report = json.loads(proc.stdout)
    clauses = {c["id"]: c for c in report["clauses"]}
    assert report["ok"] == (proc.returncode == 0), proc.stderr
    return proc.returncode, clauses


def _statuses(clauses: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {cid: clauses[cid]["status"] for cid in ACP_CLAUSES}


def test_typescript_example_agent_passes_every_acp_clause(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not TS_AGENT.is_file():
        pytest.skip("the TypeScript SDK peer is not installed (run `npm ci` in .peers/)")
    _, clauses = _check(
        tmp_path, AWP_AGENT_CLI_EXECUTABLE=os.path.realpath(node), AWP_AGENT_CLI_ARGS_JSON=json.dumps([str(TS_AGENT)])
    )
    # (The exit status also rests on the generic clean-exit clauses, bounded in wall time: not asserted.)
    assert _statuses(clauses) == dict.fromkeys(ACP_CLAUSES, "pass"), clauses
    assert clauses["acp_initialize_answered"]["detail"] == "protocolVersion 1"
    assert clauses["resume_honoured"]["status"] == "skip"  # it does not advertise loadSession


@pytest.fixture(scope="module")
def python_example_agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``examples/agent.py`` of the installed SDK's sdist (the wheel does not ship it), from the package index."""
    from importlib.metadata import version

    where = tmp_path_factory.mktemp("acp-sdist")
    wanted = f"agent-client-protocol=={version('agent-client-protocol')}"
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", wanted, "-d", str(where)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    archives = list(where.glob("*.tar.gz"))
    if got.returncode != 0 or not archives:
        pytest.skip(f"the SDK's sdist could not be fetched with pip ({got.stderr.strip()[-200:]})")
    with tarfile.open(archives[0]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/examples/agent.py"))
        tar.extractall(where, members=[member], filter="data")
    return where / member.name


def test_python_example_agent_is_judged_clause_by_clause(tmp_path: Path, python_example_agent: Path) -> None:
    _, clauses = _check(tmp_path, AWP_AGENT_CLI_EXECUTABLE=_script(tmp_path, "py-example", python_example_agent))
    statuses = _statuses(clauses)
    # It answers each prompt at once and ignores session/cancel: nothing to cancel, no failure either.
    assert statuses == {**dict.fromkeys(ACP_CLAUSES[:3], "pass"), "acp_cancel_honoured": "skip"}, clauses
    assert clauses["resume_honoured"]["status"] == "skip"  # it implements session/load but does not advertise it


@pytest.mark.parametrize(
    ("mode", "broken"),
    [
        ("good", None),
        ("bad_init", "acp_initialize_answered"),
        ("double_response", "acp_one_response_per_prompt"),
        ("foreign_session", "acp_updates_for_known_sessions"),
        ("ignore_cancel", "acp_cancel_honoured"),
    ],
)
def test_a_fixture_agent_breaking_a_clause_fails_that_clause(tmp_path: Path, mode: str, broken: str | None) -> None:
    code, clauses = _check(
        tmp_path,
        AWP_AGENT_CLI_EXECUTABLE=_script(tmp_path, "raw-agent", RAW_AGENT),
        AWP_AGENT_CLI_ENV_JSON=json.dumps({"ACP_RAW_MODE": mode}),
    )
    failed = {cid for cid, st in _statuses(clauses).items() if st == "fail"}
    if broken is None:
        assert not failed and "skip" not in _statuses(clauses).values(), clauses
    else:
        assert code == 1
        assert broken in failed, clauses
        if mode != "bad_init":  # a refused handshake leaves nothing else to judge
            assert failed == {broken}, clauses
