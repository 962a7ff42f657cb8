"""The plugin's shape: no import cycle among its modules, no class over 300 lines with its bases.

The supervisor was once a mixin chain in an import cycle (the bot run's
module importing the supervisor's for its types); these keep it composed.
Both checkers are tried on small sources first, so a clean tree cannot hide a
checker that finds nothing.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import agentrt_fastagent

PACKAGE = Path(agentrt_fastagent.__file__).parent
MAX_CLASS_LINES = 300


def imported_siblings(source: str, package: str, siblings: set[str]) -> set[str]:
    """The sibling modules ``source`` imports, anywhere in it (relative or absolute, lazy or not)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                parts = node.module.split(".") if node.module else []
            elif node.level == 0 and node.module and node.module.split(".")[0] == package:
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts:
                found.add(parts[0])
            else:  # `from . import _x` / `from package import _x`
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top, *rest = alias.name.split(".")
                if top == package and rest:
                    found.add(rest[0])
    return found & siblings


def import_cycle(sources: dict[str, str], package: str) -> tuple[str, ...] | None:
    """One import cycle among the modules ``sources`` (name → text), or ``None``."""
    names = set(sources)
    graph = {name: imported_siblings(text, package, names) for name, text in sources.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return tuple(exc.args[1])
    return None


def class_sizes(sources: dict[str, str]) -> dict[str, int]:
    """Each class's lines, counting the classes of ``sources`` it derives from (by name), transitively."""
    classes: dict[str, ast.ClassDef] = {}
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node

    def size(name: str, seen: frozenset[str]) -> int:
        node = classes[name]
        own = (node.end_lineno or node.lineno) - node.lineno + 1
        named = [b for b in node.bases if isinstance(b, ast.Name | ast.Attribute)]
        bases = {b.id if isinstance(b, ast.Name) else b.attr for b in named}
        return own + sum(size(b, seen | {name}) for b in bases if b in classes and b not in seen)

    return {name: size(name, frozenset()) for name in classes}


def _plugin_sources() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(PACKAGE.glob("*.py"))}


def test_the_cycle_checker_finds_cycles_through_any_import_form() -> None:
    assert import_cycle({"_a": "from ._b import x", "_b": "import pkg._a"}, "pkg") is not None
    assert import_cycle({"_a": "def f():\n    from pkg._b import x", "_b": "from . import _a"}, "pkg") is not None
    lazy = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import A"
    assert import_cycle({"_a": "from ._b import x", "_b": lazy}, "pkg") is not None
    assert import_cycle({"_a": "from ._b import x", "_b": "from other._a import y"}, "pkg") is None


def test_the_size_checker_counts_in_package_bases() -> None:
    base = "class Base:\n" + "    x = 1\n" * 199
    derived = "from ._base import Base\nclass Mixed(Base):\n" + "    y = 2\n" * 199
    sizes = class_sizes({"_base": base, "_derived": derived})
    assert sizes == {"Base": 200, "Mixed": 400}
    assert class_sizes({"_only": "class Alone(Foreign):\n    pass\n"}) == {"Alone": 2}


def test_no_import_cycle_among_the_plugins_modules() -> None:
    sources = _plugin_sources()
    assert {"_supervisor", "_reconciler", "_bot_run"} <= set(sources)
    assert import_cycle(sources, "agentrt_fastagent") is None


@pytest.mark.parametrize("name", sorted(class_sizes(_plugin_sources())))
def test_no_class_over_300_lines_with_its_bases(name: str) -> None:
    assert class_sizes(_plugin_sources())[name] <= MAX_CLASS_LINES
