"""Each plugin's tests read only files inside their own distribution, so a plugin can be tested alone.

A file under ``plugins/<dist>/tests`` that climbs above ``plugins/<dist>/`` from ``__file__``
(``parents[N]``, ``.parent`` chains, ``os.path.dirname``, ``/ ".."``) or names the monorepo's shared
trees (``tests/captures``, ``dialects/fixtures``, ``tests/fixtures``, a ``.peers`` path part) reads
something a copy of the distribution does not have.  Captures and fixtures live in the distribution's
own ``tests/``; real peers are found through :func:`agentrt.testing.real_peers.peer_path`, the loopback
fake model APIs are :mod:`agentrt.testing.fake_apis`.  The monorepo's integration suite under
``tests/`` reads plugin data through ``tests/plugin_data.py``.  Deliberate exceptions are listed
below with their reason, and each must still need its exception.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_self_contained import _Climb

ROOT = Path(__file__).resolve().parents[2]
SHARED_NAMES = re.compile(r"tests/captures|dialects/fixtures|tests/fixtures|(^|/)\.peers/node_modules|^\.peers$")
PATH_CALLS = ("Path", "PurePath", "join")  # calls whose string arguments are path parts

#: Files allowed to read outside their distribution, and why.
EXCEPTIONS = {
    "plugins/agentrt-sqlite/tests/test_transcript_replay.py": (
        "replays the stream-json and ACP dialects' captures (and the ACP fixture agent) into the SQLite "
        "transcript: an integration test of three distributions, which belongs in tests/sinks"
    ),
    "plugins/agentrt-web/tests/conftest.py": (
        "the bots page drives the FastAgent fixture CLI kept with agentrt-fastagent's tests"
    ),
}

#: Capture files copied into another distribution's tests (so that one runs alone), and their recording.
COPIES = {
    "plugins/agentrt-web/tests/captures/claude_code_tool_use_allowed_partial.stdout.jsonl": (
        "plugins/agentrt-stream-json/tests/captures/claude-code/tool_use_allowed_partial.stdout.jsonl"
    ),
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def escapes(source: str, within: Path) -> list[str]:
    """Where ``source`` (the file at ``within``, relative to its distribution) reads outside the distribution."""
    tree = ast.parse(source)
    climb = _Climb()
    climb.visit(tree)
    depth = len(within.parts)  # levels from the file up to the distribution's root
    found = [f"{within}:{line}: {up} levels up from the file" for line, up in climb.reaches if up > depth]
    docstrings = _docstrings(tree)
    parts: set[int] = set()  # string constants used as path parts: ``x / "..."``, ``Path("...")``, ``join(...)``
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts.update(id(side) for side in (node.left, node.right))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in PATH_CALLS:
                parts.update(id(arg) for arg in node.args)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        up = id(node) in parts and (node.value == ".." or node.value.startswith("../"))
        if up or SHARED_NAMES.search(node.value):
            found.append(f"{within}:{node.lineno}: names {node.value[:60]!r}")
    return found


def _plugin_test_files() -> list[tuple[Path, Path]]:
    """(file, its path relative to its distribution) for every Python file of every plugin's tests."""
    return sorted(
        (path, path.relative_to(dist))
        for dist in sorted((ROOT / "plugins").iterdir())
        if (dist / "tests").is_dir()
        for path in (dist / "tests").rglob("*.py")
    )


def test_plugin_tests_read_only_inside_their_distribution() -> None:
    files = _plugin_test_files()
    assert len(files) > 60  # the scan saw the plugins' tests
    found = {
        str(path.relative_to(ROOT)): hits
        for path, within in files
        if (hits := escapes(path.read_text("utf-8"), within))
    }
    unlisted = {name: hits for name, hits in found.items() if name not in EXCEPTIONS}
    assert unlisted == {}
    stale = sorted(set(EXCEPTIONS) - set(found))
    assert stale == [], "these no longer read outside their distribution: drop them from EXCEPTIONS"


def test_a_plugin_copied_alone_passes_its_capture_tests(tmp_path: Path) -> None:
    # The OpenAI provider's tests replay its captures: from a copy of the distribution with nothing beside it.
    copy = tmp_path / "agentrt-openai"
    shutil.copytree(ROOT / "plugins" / "agentrt-openai", copy, ignore=shutil.ignore_patterns("__pycache__"))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
            "-o", "trio_mode=true", "tests/test_captures.py"]  # fmt: skip
    # An allowlisted environment, as every child gets: the copy needs only the interpreter and a locale.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary


def test_copied_captures_are_the_recordings_bytes() -> None:
    for copy, source in COPIES.items():
        assert (ROOT / copy).read_bytes() == (ROOT / source).read_bytes(), f"re-copy {source} to {copy}"


@pytest.mark.parametrize(
    ("within", "source"),
    [
        ("tests/x.py", 'X = Path(__file__).resolve().parents[3] / "tests" / "dialects" / "fixtures"'),
        ("tests/x.py", 'X = Path(__file__).resolve().parents[2] / "agentrt-other" / "tests"'),
        ("tests/x.py", 'HERE = Path(__file__).parent\nX = HERE.parents[1] / "agentrt-fastagent"'),
        ("tests/x.py", 'X = Path(__file__).parent.parent.parent / "docs"'),
        ("tests/x.py", "X = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))"),
        ("tests/x.py", 'X = Path(__file__).parent / ".." / ".." / "docs"'),
        ("tests/x.py", 'X = os.path.join(HERE, "..", "shared")'),
        ("tests/x.py", 'X = ROOT / "tests/captures/claude-code"'),
        ("tests/sub/x.py", 'X = Path("dialects/fixtures/acp_agent.py")'),
        ("tests/x.py", 'X = Path.cwd() / ".peers" / "node_modules"'),
        ("tests/x.py", 'X = Path("../shared/data")'),
    ],
)
def test_each_way_out_of_the_distribution_is_caught(within: str, source: str) -> None:
    assert escapes(source, Path(within)), source


@pytest.mark.parametrize(
    ("within", "source"),
    [
        ("tests/x.py", 'X = Path(__file__).resolve().parent / "captures" / "acp"'),
        ("tests/x.py", 'X = Path(__file__).resolve().parents[1] / "pyproject.toml"'),
        ("tests/sub/x.py", 'X = Path(__file__).resolve().parents[2] / "src"'),
        ("tests/x.py", '"""Replays ``tests/captures/claude-code`` (a docstring names it)."""'),
        ("tests/x.py", 'pytest.skip("Claude Code is not installed (`npm ci` in .peers/)")'),
        ("tests/x.py", '@pytest.mark.parametrize("bad", ["", "..", "a/b"])\ndef test_ids(bad): ...'),
    ],
)
def test_paths_inside_the_distribution_pass(within: str, source: str) -> None:
    assert escapes(source, Path(within)) == []
