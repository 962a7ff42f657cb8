"""``agentrt plugin new KIND NAME [DIR]``: the package it writes installs with real pip, passes its own
test and shows in ``agentrt plugins``; bad input is refused with a code and writes nothing.

Everything runs as a user would: the CLI as a subprocess, pip building the package with hatchling
(``--no-build-isolation --no-index``: offline) into a target directory that the children then have on
PYTHONPATH, exactly like a pip-installed third-party plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrt._plugin_new import KINDS, plugin_names

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
CAPABILITY = {"dialect": "dialects", "provider": "providers", "tool": "tools", "sink": "sinks"}


def _env(**extra: str) -> dict[str, str]:
    # An allow-listed environment, never os.environ wholesale.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def _agentrt(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentrt", *args], cwd=cwd, env=_env(**env),
                          capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_package_installs_passes_its_test_and_is_listed(kind: str, tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="--no-build-isolation needs hatchling in the venv")
    name = f"acme-{kind}"
    names = plugin_names(name)
    made = _agentrt("plugin", "new", kind, name, cwd=tmp_path)  # DIR left out: ./agentrt-acme-<kind>
    assert made.returncode == 0, made.stderr
    package = tmp_path / names.dist
    assert (package / "pyproject.toml").is_file() and (package / "src" / names.package / "__init__.py").is_file()
    assert f"wrote {len(list(p for p in package.rglob('*') if p.is_file()))} files to {package}" in made.stdout

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(site), str(package)],
        check=True, timeout=TIMEOUT, env=_env(), capture_output=True, cwd=tmp_path,
    )
    listed = _agentrt("plugins", "--json", cwd=tmp_path, PYTHONPATH=str(site), AGENTRT_LOAD_PLUGINS=name)
    assert listed.returncode == 0, listed.stderr
    (info,) = json.loads(listed.stdout)
    assert (info["name"], info["distribution"], info["version"]) == (name, names.dist, "0.1.0")
    assert info[CAPABILITY[kind]] == [names.capability(kind)]
    assert info["hooks"] == [f"agentrt_register_{CAPABILITY[kind]}"]

    # The hooks module is thin: importing it loads none of the package's implementation modules.
    module = names.package
    probe = f"import sys, {module}; loaded = sorted(m for m in sys.modules if m.startswith('{module}.')); " \
            "assert not loaded, loaded"
    thin = subprocess.run([sys.executable, "-c", probe], env=_env(PYTHONPATH=str(site)), capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=tmp_path)
    assert thin.returncode == 0, thin.stderr

    # Its own test, against the installed distribution (the source tree is not on the path).
    tests = package / "tests"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests), str(tests)],
        env=_env(PYTHONPATH=str(site)), capture_output=True, text=True, timeout=TIMEOUT, cwd=tests,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert " passed" in ran.stdout and "failed" not in ran.stdout



@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["widget", "acme"], "unknown_plugin_kind"),
        (["dialect", "Acme"], "invalid_plugin_name"),
        (["dialect", "acme__notes"], "invalid_plugin_name"),
        (["dialect", "acme-_notes"], "invalid_plugin_name"),
        (["dialect", "acme-"], "invalid_plugin_name"),
        (["tool", "acme--notes"], "invalid_plugin_name"),
        (["tool", "9lives"], "invalid_plugin_name"),
        (["tool", "a\x1b[2Jb"], "invalid_plugin_name"),
        (["sink", "x" * 49], "invalid_plugin_name"),
        (["dialect", "awp-jsonl"], "plugin_name_taken"),
        (["provider", "openai"], "plugin_name_taken"),
        (["tool", "acp"], "plugin_name_taken"),
    ],
)
def test_bad_input_is_refused_with_a_code_and_writes_nothing(args: list[str], code: str, tmp_path: Path) -> None:
    out = _agentrt("plugin", "new", *args, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith(f"agentrt: error: {code}: "), out.stderr
    assert "\x1b" not in out.stderr  # the bad name is shown escaped
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "file").write_text("mine", encoding="utf-8")
    for target in ("taken", "file"):  # a non-empty directory, and a file
        out = _agentrt("plugin", "new", "tool", "acme-notes", target, cwd=tmp_path)
        assert out.returncode == 2
        assert out.stderr.startswith("agentrt: error: plugin_dir_not_empty: "), out.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["file", "keep.txt", "taken"]
    (tmp_path / "empty").mkdir()
    assert _agentrt("plugin", "new", "tool", "acme-notes", "empty", cwd=tmp_path).returncode == 0
    assert (tmp_path / "empty" / "src" / "agentrt_acme_notes" / "_tool.py").is_file()


def test_a_directory_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine", encoding="utf-8")
    out = _agentrt("plugin", "new", "sink", "acme-log", "file/inside", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("agentrt: error: plugin_write_failed: "), out.stderr
    assert "Traceback" not in out.stderr


def test_the_packages_are_clean_by_the_projects_lint_rules(tmp_path: Path) -> None:
    pytest.importorskip("ruff", reason="the lint check runs ruff, a development tool (requirements-dev.txt)")
    for kind in KINDS:
        assert _agentrt("plugin", "new", kind, f"acme-{kind}", kind, cwd=tmp_path).returncode == 0
    assert len(list(tmp_path.rglob("*.py"))) == 3 * len(KINDS)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(tmp_path)],
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_names_a_plugin_gets() -> None:
    names = plugin_names("acme-notes-2")
    assert (names.dist, names.package, names.ident, names.cls, names.env) == (
        "agentrt-acme-notes-2", "agentrt_acme_notes_2", "acme_notes_2", "AcmeNotes2", "ACME_NOTES_2")
    assert names.capability("tool") == "acme_notes_2" and names.capability("sink") == "acme-notes-2"
    assert plugin_names("agentrt-acme").dist == "agentrt-acme"
    snake = plugin_names("acme_notes")  # as tool names are often written
    assert (snake.name, snake.dist, snake.package, snake.cls, snake.capability("tool")) == (
        "acme_notes", "agentrt-acme-notes", "agentrt_acme_notes", "AcmeNotes", "acme_notes")


def test_a_broken_installed_plugin_does_not_stop_writing_one(tmp_path: Path) -> None:
    # `agentrt plugins` reports the broken one; writing a new package is no reason to fail.
    out = _agentrt("plugin", "new", "sink", "acme-log", cwd=tmp_path, AGENTRT_PLUGIN_MODULES="agentrt_no_such_module")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "agentrt-acme-log" / "src" / "agentrt_acme_log" / "_sink.py").is_file()
    listed = _agentrt("plugins", cwd=tmp_path, AGENTRT_PLUGIN_MODULES="agentrt_no_such_module")
    assert listed.returncode == 2 and "plugin_load_failed" in listed.stderr
