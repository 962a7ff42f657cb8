"""The suite stands on its own: no test or bench file reads a path outside the checkout.

Captures live in ``plugins/<dist>/tests/captures/``, project fixtures in ``plugins/<dist>/tests/fixtures/``,
the bench corpus in ``bench/corpus.py``.  A file that climbs above the checkout from ``__file__``
(``Path(__file__).resolve().parents[2].parent``, ``ROOT.parent``, ``os.path.dirname`` once too
often, ``/ ".."``) or names the old shared tree (``../shared``) would pass on a machine that has it
beside the checkout and fail on a fresh clone; this test finds both, by reading the source.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("tests", "bench", "plugins/*/tests")  # each plugin's tests sit with its distribution
OUTSIDE_NAMES = re.compile(r"(^|[/\\])\.\.[/\\]shared\b|/work/shared\b|\bshared[/\\](fixtures|bench|contracts)\b")


def _is_file_dunder(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "__file__"


class _Climb(ast.NodeVisitor):
    """How far above a file each path expression rooted at ``__file__`` reaches (0: the file itself)."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.reaches: list[tuple[int, int]] = []  # (line, levels above the file)

    def level(self, node: ast.AST) -> int | None:
        if _is_file_dunder(node):
            return 0
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("Path", "PurePath", "abspath", "realpath", "normpath", "fspath", "str") and node.args:
                return self.level(node.args[0])
            if name == "dirname" and node.args:
                inner = self.level(node.args[0])
                return None if inner is None else inner + 1
            if isinstance(func, ast.Attribute) and name in ("resolve", "absolute", "expanduser"):
                return self.level(func.value)
            return None
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            inner = self.level(node.value)
            return None if inner is None else inner + 1
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
            inner = self.level(node.value.value)
            index = node.slice
            if inner is not None and isinstance(index, ast.Constant) and isinstance(index.value, int):
                return inner + index.value + 1
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            inner = self.level(node.left)
            right = node.right
            if inner is None or not (isinstance(right, ast.Constant) and isinstance(right.value, str)):
                return inner if inner is None else max(inner - 1, 0)  # a name below: down one, at least
            parts = [p for p in right.value.split("/") if p not in ("", ".")]
            for part in parts:
                inner = inner + 1 if part == ".." else max(inner - 1, 0)
            return inner
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        found = self.level(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name) and found is not None:
                self.names[target.id] = found
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name) and node.value is not None:
            found = self.level(node.value)
            if found is not None:
                self.names[node.target.id] = found
        self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.expr):
            found = self.level(node)
            if found is not None:
                self.reaches.append((getattr(node, "lineno", 0), found))
        super().generic_visit(node)


def outside_references(source: str, relative: Path) -> list[str]:
    """Where ``source`` (the file at ``relative`` in the checkout) reaches outside the checkout."""
    found: list[str] = []
    tree = ast.parse(source)
    climb = _Climb()
    climb.visit(tree)
    depth = len(relative.parts)  # levels from the file up to the checkout's root
    found += [f"{relative}:{line}: {up} levels up from the file" for line, up in climb.reaches if up > depth]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and OUTSIDE_NAMES.search(node.value):
            found.append(f"{relative}:{node.lineno}: names the shared tree beside the checkout")
    return found


def _files() -> list[Path]:
    this = Path(__file__).resolve()  # its examples of ways out are data, not reads
    return sorted(p for top in SCANNED for base in ROOT.glob(top) for p in base.rglob("*.py") if p != this)


def test_no_test_or_bench_file_reads_outside_the_checkout() -> None:
    files = _files()
    assert len(files) > 100  # the scan saw the suite
    found = [hit for path in files for hit in outside_references(path.read_text("utf-8"), path.relative_to(ROOT))]
    assert found == []


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("tests/core/x.py", 'X = Path(__file__).resolve().parents[2].parent / "shared" / "bench"'),
        ("tests/core/x.py", 'ROOT = Path(__file__).resolve().parents[2]\nX = ROOT.parent / "shared"'),
        ("bench/_x.py", '_HERE = Path(__file__).resolve().parent\nX = _HERE.parent.parent / "shared"'),
        ("bench/x.py", "X = (Path(__file__).resolve().parents[1].parent / 'data')"),
        ("tests/x.py", "X = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))"),
        ("tests/cli/x.py", 'X = Path(__file__).parents[2] / ".." / "data"'),
        ("tests/cli/x.py", 'X = "../shared/fixtures/claude-code"'),
        ("tests/cli/x.py", 'X = Path("/work/shared") / "bench"'),
    ],
)
def test_each_way_out_is_caught(where: str, source: str) -> None:
    assert outside_references(source, Path(where)), source


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("tests/core/x.py", 'X = Path(__file__).resolve().parents[2] / "bench" / "corpus.py"'),
        ("tests/core/x.py", 'X = Path(__file__).resolve().parents[1] / "captures" / "claude-code"'),
        ("bench/x.py", 'X = Path(__file__).resolve().parents[1] / "tests" / "captures"'),
        ("tests/x.py", 'X = Path(__file__).parent / "fixtures" / "shared.db"'),
    ],
)
def test_paths_inside_the_checkout_pass(where: str, source: str) -> None:
    assert outside_references(source, Path(where)) == []
