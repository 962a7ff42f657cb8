"""The run line in each example's docstring works as printed, from the checkout, outside any activated venv."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def _run_line(name: str) -> list[str]:
    """The indented command line of the example's docstring, as argv (optional [ARGS] dropped)."""
    text = (EXAMPLES / name).read_text()
    match = re.search(r"^    ((?:\S+=\S+ )*\.venv/bin/\S+ .+)$", text, re.M)
    assert match is not None, f"{name} says how to run it with the checkout's .venv"
    return [word for word in shlex.split(match.group(1)) if not word.startswith("[")]


def _env() -> dict[str, str]:
    # A shell without the venv activated: PATH without .venv/bin, no VIRTUAL_ENV.
    path = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if ".venv" not in p)
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8", "PWD": str(ROOT)}


@pytest.mark.skipif(not VENV_PYTHON.exists(), reason="no .venv in the checkout: the README's install makes it")
@pytest.mark.parametrize("name", ["embed.py", "embed_with_sinks.py"])
def test_embedding_examples_run_as_printed(name: str) -> None:
    argv = _run_line(name)
    assert argv[:2] == [".venv/bin/python", f"docs/examples/{name}"]
    done = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    assert "You said: " in done.stdout


@pytest.mark.skipif(not VENV_PYTHON.exists(), reason="no .venv in the checkout: the README's install makes it")
def test_echo_agent_runs_as_printed_and_says_exactly_the_reply() -> None:
    words = _run_line("echo_agent.py")
    env = _env()
    # The line's $PWD is the checkout it is run from.
    assignments = {k: v.replace("$PWD", str(ROOT)) for k, v in (w.split("=", 1) for w in words if "=" in w[:40])}
    argv = [w for w in words if "=" not in w[:40]]
    assert argv[0] == ".venv/bin/agentrt"
    done = subprocess.run(argv, cwd=ROOT, env={**env, **assignments}, capture_output=True, text=True, timeout=90,
                          check=False)
    assert done.returncode == 0, done.stderr
    # No trailing space after the last word: the streamed text is exactly the reply.
    assert done.stdout == "You said: hello there\n"
