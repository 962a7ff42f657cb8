"""Meta-test: docs/architecture.md's "Dependencies between distributions" matches the pyproject files."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"^[A-Za-z0-9._-]+")


def _name(requirement: str) -> str:
    match = _NAME.match(requirement.strip())
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def declared() -> dict[str, tuple[set[str], dict[str, set[str]]]]:
    """Per distribution: its agentrt-* dependencies (besides agentrt) and its extras' agentrt-* ones."""
    out: dict[str, tuple[set[str], dict[str, set[str]]]] = {}
    for path in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
        deps = {_name(d) for d in project.get("dependencies", [])}
        extras = {
            extra: {_name(d) for d in reqs if _name(d).startswith("agentrt")}
            for extra, reqs in project.get("optional-dependencies", {}).items()
        }
        assert "agentrt" in deps, f"{project['name']} does not depend on agentrt"
        out[project["name"]] = ({d for d in deps if d.startswith("agentrt-")}, extras)
    return out


def documented() -> dict[str, tuple[set[str], dict[str, set[str]]]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Dependencies between distributions", 1)[1].split("\n## ", 1)[0]
    out: dict[str, tuple[set[str], dict[str, set[str]]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`agentrt-"):
            continue
        deps = set(re.findall(r"`(agentrt-[a-z-]+)`", cells[1]))
        extras: dict[str, set[str]] = {}
        for part in filter(None, (p.strip() for p in cells[2].split(";"))):
            extra, _, reqs = part.partition(":")
            extras[extra.strip().strip("`")] = set(re.findall(r"`(agentrt-[a-z-]+)`", reqs))
        out[cells[0].strip("`")] = (deps, extras)
    return out


def test_the_dependency_table_matches_the_pyproject_files() -> None:
    truth = declared()
    assert len(truth) >= 9
    assert documented() == truth


def test_the_table_parser_sees_a_wrong_row() -> None:
    truth = declared()
    truth["agentrt-web"] = (set(), {})  # as if the bots extra were forgotten
    assert documented() != truth
