"""The plugin guide's example, installed as a REAL distribution, found through its entry point.

pip builds and installs docs/examples/agentrt-example-dialect into a temporary
directory; child processes with that directory on PYTHONPATH see it exactly as
they would a pip-installed third-party plugin.  The same children prove the
two loading controls, AGENTRT_LOAD_PLUGINS and AGENTRT_DISABLE_PLUGINS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentrt-example-dialect"
TIMEOUT = 120


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    pytest.importorskip("hatchling", reason="--no-build-isolation needs hatchling in the venv")
    # Build from a copy so that nothing is written into the source tree.
    source = tmp_path_factory.mktemp("src") / EXAMPLE.name
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        timeout=TIMEOUT,
        env=_env(),
        capture_output=True,
    )
    assert list(target.glob("agentrt_example_dialect-*.dist-info/entry_points.txt"))
    return target


def _env(**extra: str) -> dict[str, str]:
    # An allow-listed environment, never os.environ wholesale.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def _plugins(site: Path, **controls: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "agentrt", "plugins", "--json"],
        env=_env(PYTHONPATH=str(site), **controls),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert out.returncode == 0, out.stderr
    data: list[dict[str, Any]] = json.loads(out.stdout)
    return data


def test_installed_example_is_listed_with_its_dialect(site: Path) -> None:
    infos = _plugins(site, AGENTRT_LOAD_PLUGINS="example-dialect,awp-jsonl,stream-json")
    by_name = {i["name"]: i for i in infos}
    assert sorted(by_name) == ["awp-jsonl", "example-dialect", "stream-json"]
    example = by_name["example-dialect"]
    assert example["distribution"] == "agentrt-example-dialect"
    assert example["version"] == "0.1.0"
    assert example["dialects"] == ["echo-jsonl"]
    assert example["hooks"] == ["agentrt_register_dialects"]
    assert by_name["awp-jsonl"]["dialects"] == ["awp-jsonl", "passthrough"]
    assert by_name["stream-json"]["dialects"] == ["stream-json"]


def test_load_plugins_selects_only_the_named(site: Path) -> None:
    infos = _plugins(site, AGENTRT_LOAD_PLUGINS="example-dialect")
    assert [i["name"] for i in infos] == ["example-dialect"]
    assert _plugins(site, AGENTRT_LOAD_PLUGINS="") == []


def test_disable_plugins_skips_the_named(site: Path) -> None:
    infos = _plugins(site, AGENTRT_LOAD_PLUGINS="example-dialect,awp-jsonl", AGENTRT_DISABLE_PLUGINS="example-dialect")
    assert [i["name"] for i in infos] == ["awp-jsonl"]
    infos = _plugins(site, AGENTRT_LOAD_PLUGINS="example-dialect,awp-jsonl", AGENTRT_DISABLE_PLUGINS=" awp-jsonl ,")
    assert [i["name"] for i in infos] == ["example-dialect"]


def test_without_the_distribution_it_is_absent(tmp_path: Path) -> None:
    infos = _plugins(tmp_path, AGENTRT_LOAD_PLUGINS="example-dialect,awp-jsonl")
    assert [i["name"] for i in infos] == ["awp-jsonl"]


def test_the_examples_own_check_dialect_test_passes(site: Path, tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    shutil.copytree(EXAMPLE / "tests", tests)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tests)],
        env=_env(PYTHONPATH=str(site)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
