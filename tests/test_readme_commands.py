"""The README's two commands are what CI runs and what the developer sessions install, word for word."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _command(start: str) -> str:
    """The README's sh block whose introducing paragraph starts with ``start``."""
    text = (ROOT / "README.md").read_text()
    found = re.findall(r"(?:^|\n\n)((?:(?!\n\n).)+?)\n\n```sh\n(.+?)\n```", text, re.S)
    matches = [body for intro, body in found if intro.strip().startswith(start)]
    assert len(matches) == 1, f"one README block after a paragraph starting {start!r}"
    assert "\n" not in matches[0], "the command is one line"
    return matches[0]


def test_ci_runs_the_readme_main_job_and_checks_its_answer() -> None:
    main = _command("Install and run the main job")
    install, demo = main.split(" && .venv/bin/agentrt demo ", 1)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in ci
    assert f"answer=$(.venv/bin/agentrt demo {demo})" in ci
    assert any(line.startswith('case "$answer" in *Paris*)') for line in ci)
    assert "CMAKE_ARGS" not in main, "nothing is compiled: no build flags to pass"


def test_ci_runs_the_readme_test_command_last() -> None:
    tests = _command("Install and run the tests")
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == tests


def test_the_slow_session_installs_the_model_extra_as_the_readme_does() -> None:
    nox = (ROOT / "noxfile.py").read_text()
    assert '"-e", "./plugins/agentrt-local-model[model]"' in nox
    assert "-e './plugins/agentrt-local-model[model]'" in _command("Install and run the main job")
