"""Meta-tests: the docs that list names list all of them, and only names that exist.

* ``docs/architecture.md``'s module tables name every module of ``src/agentrt`` and of each
  ``plugins/*/src`` package (a table row per module, its first cell the dotted name in
  backticks), and no module that is gone.
* ``docs/lowlevel.md`` documents every public method and property of
  :class:`agentrt.lowlevel.AgentProcess`, :class:`~agentrt.lowlevel.HostedProcess` and
  :class:`~agentrt.lowlevel.Pipes` in the class's own section (``### `AgentProcess` ``), and
  nothing there that the class lacks.
  (Every name of ``agentrt.lowlevel.__all__`` is checked by ``tests/core/test_api_boundaries.py``.)
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from agentrt import lowlevel

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LOWLEVEL = ROOT / "docs" / "lowlevel.md"

_MODULE_CELL = re.compile(r"^\|\s*`(agentrt(?:_[a-z0-9_]+)?(?:\.[A-Za-z0-9_]+)*)`\s*\|")


def source_modules() -> set[str]:
    """Every module of the core and of each plugin's package, as a dotted name (a package by its own name)."""
    roots = [ROOT / "src"] + sorted(ROOT.glob("plugins/*/src"))
    out: set[str] = set()
    for root in roots:
        for path in root.rglob("*.py"):
            rel = path.relative_to(root)
            if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts and parts[0].startswith("agentrt"):
                out.add(".".join(parts))
    return out


def documented_modules(text: str) -> list[str]:
    """The dotted names in the first cell of the page's table rows, in order (duplicates kept)."""
    return [m.group(1) for line in text.splitlines() if (m := _MODULE_CELL.match(line.strip()))]


def test_every_module_is_in_an_architecture_table() -> None:
    modules = source_modules()
    assert len(modules) > 150  # the walk found the tree
    missing = modules - set(documented_modules(ARCHITECTURE.read_text(encoding="utf-8")))
    assert not missing, f"modules missing from docs/architecture.md's tables: {sorted(missing)}"


def test_every_documented_module_exists_and_is_listed_once() -> None:
    documented = documented_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    gone = set(documented) - source_modules()
    assert not gone, f"docs/architecture.md lists modules that no longer exist: {sorted(gone)}"
    twice = sorted({name for name in documented if documented.count(name) > 1})
    assert not twice, f"listed more than once: {twice}"


def test_the_table_parser_sees_a_module_row_and_ignores_the_rest() -> None:
    text = "\n".join([
        "| `agentrt._os.spawn` | children that die with their owner |",
        "| `agentrt_web._server` | the server |",
        "| `agentrt-web` | a distribution, not a module |",
        "| module | contract |",
        "`agentrt._pump` in prose",
    ])
    assert documented_modules(text) == ["agentrt._os.spawn", "agentrt_web._server"]


def public_members(cls: type) -> set[str]:
    """Public methods and properties, inherited ones from in-distribution bases included."""
    return {
        name for name in dir(cls)
        if not name.startswith("_") and (callable(getattr(cls, name)) or isinstance(getattr(cls, name), property))
    }


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a ``###`` line) up to the next heading of that level or above."""
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    end = re.search(r"^#{2,3} ", rest, re.M)
    return rest[: end.start()] if end else rest


CLASSES = ["AgentProcess", "HostedProcess", "Pipes"]


@pytest.mark.parametrize("name", CLASSES)
def test_every_public_method_is_in_its_lowlevel_section(name: str) -> None:
    cls = getattr(lowlevel, name)
    members = public_members(cls)
    assert members, name
    body = section(LOWLEVEL.read_text(encoding="utf-8"), f"### `{name}`")
    missing = {m for m in members if not re.search(rf"`(?:{name}\.)?{m}\b", body)}
    assert not missing, f"docs/lowlevel.md's {name} section misses {sorted(missing)}"


@pytest.mark.parametrize("name", CLASSES)
def test_the_lowlevel_member_tables_name_only_real_members(name: str) -> None:
    cls = getattr(lowlevel, name)
    body = section(LOWLEVEL.read_text(encoding="utf-8"), f"### `{name}`")
    rows = re.findall(r"^\|\s*`([a-z_][a-z0-9_]*)\b", body, re.M)
    assert rows, f"no member table under ### `{name}`"
    known = public_members(cls) | instance_attributes(cls)
    unknown = {row for row in rows if row not in known}
    assert not unknown, f"docs/lowlevel.md documents {name} members that do not exist: {sorted(unknown)}"


def instance_attributes(cls: type) -> set[str]:
    """Public attributes declared on the class or its bases, or set as ``self.x = ...`` in their code."""
    names: set[str] = set()
    for base in cls.__mro__[:-1]:
        names |= {n for n in getattr(base, "__annotations__", {}) if not n.startswith("_")}
        try:
            source = inspect.getsource(base)
        except (OSError, TypeError):
            continue
        names |= set(re.findall(r"\bself\.([a-z][a-z0-9_]*)\s*(?::[^=\n]+)?=(?!=)", source))
    return names
