"""Meta-test: no module of the core or of a plugin's package grows past 400 lines.

A module over the limit is split by what it holds into private modules with
names that say so (issue 30).  The modules over it when this test came were
listed in :data:`EXCEPTIONS` with their line counts: each could shrink but
never grow, and one at or under the limit had to leave the list, so the list
only shrank (it is empty now; the rules stay, checked on made-up counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400

#: Modules over :data:`LIMIT` (path from the repository root -> its line count when listed).
#: Empty since every module was split under it; never add one, never raise a count.
EXCEPTIONS: dict[str, int] = {}


def module_lines() -> dict[str, int]:
    """Every ``.py`` file under ``src/`` and ``plugins/*/src/`` (path from the root -> its line count)."""
    roots = [ROOT / "src", *sorted(ROOT.glob("plugins/*/src"))]
    out: dict[str, int] = {}
    for root in roots:
        for path in root.rglob("*.py"):
            rel = path.relative_to(ROOT)
            if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue
            out[rel.as_posix()] = len(path.read_bytes().splitlines())
    return out


def size_problems(lines: Mapping[str, int], exceptions: Mapping[str, int], limit: int = LIMIT) -> list[str]:
    """What breaks the rule: a module over ``limit`` not excepted, an exception grown, gone or back under ``limit``."""
    problems = []
    for path, count in sorted(lines.items()):
        if count > limit and path not in exceptions:
            problems.append(f"{path}: {count} lines, over {limit}: split it by what it holds into private modules "
                            "whose names say so (adding it to EXCEPTIONS is not the fix)")
    for path, listed in sorted(exceptions.items()):
        now = lines.get(path)
        if now is None:
            problems.append(f"{path}: listed in EXCEPTIONS but gone: remove it from the list (the list only shrinks)")
        elif now <= limit:
            problems.append(f"{path}: {now} lines, at or under {limit} now: remove it from EXCEPTIONS "
                            "(the list only shrinks)")
        elif now > listed:
            problems.append(f"{path}: grew to {now} lines from the {listed} it is listed with: an exception may "
                            "only shrink (lower its count in EXCEPTIONS when it does)")
    return problems


def test_the_walk_finds_the_core_and_every_plugin() -> None:
    lines = module_lines()
    assert lines["src/agentrt/__init__.py"] > 0
    plugins = {path.split("/")[1] for path in lines if path.startswith("plugins/")}
    assert plugins == {path.parent.name for path in ROOT.glob("plugins/*/src")}
    assert len(lines) > 150


def test_no_module_is_over_the_limit_and_the_exceptions_only_shrink() -> None:
    problems = size_problems(module_lines(), EXCEPTIONS)
    assert not problems, "module sizes (tests/core/test_module_sizes.py):\n" + "\n".join(problems)


def test_every_rule_is_checked() -> None:
    # The checker on made-up counts: each rule fires on its own case and stays quiet otherwise.
    assert size_problems({"a.py": 400, "b.py": 12}, {}) == []
    assert [p.split(":")[0] for p in size_problems({"a.py": 401}, {})] == ["a.py"]
    assert "over 400" in size_problems({"a.py": 401}, {})[0]
    assert size_problems({"a.py": 450}, {"a.py": 450}) == []
    assert size_problems({"a.py": 440}, {"a.py": 450}) == []  # shrinking is fine
    assert "grew to 451" in size_problems({"a.py": 451}, {"a.py": 450})[0]
    assert "the list only shrinks" in size_problems({"a.py": 400}, {"a.py": 450})[0]
    assert "the list only shrinks" in size_problems({}, {"a.py": 450})[0]
    assert "over 50" in size_problems({"a.py": 51}, {}, limit=50)[0]
