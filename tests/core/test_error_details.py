"""Every ``AgentrtError(code, detail)`` built in the code says why: a detail that is never empty nor the code.

The check walks the syntax tree of every module under ``src/`` and ``plugins/*/src`` and fails on a
construction site whose detail is missing, an empty string, or the same as its code (the same literal,
the same name, or the same expression).  ``TurnFailed(code=..., message=...)`` sites are held to the
last rule: a message never falls back to the code (an agent may still send none; see agentrt run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("src/agentrt/**/*.py"), *ROOT.glob("plugins/*/src/**/*.py")])


def _sites(path: Path) -> list[tuple[int, ast.Call]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in ("AgentrtError", "TurnFailed"):
            out.append((node.lineno, node))
    return out


def _problem(call: ast.Call) -> str | None:
    args = list(call.args)
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    if any(isinstance(a, ast.Starred) for a in args) or any(kw.arg is None for kw in call.keywords):
        return None  # forwarded arguments: checked where they are built
    code = args[0] if args else keywords.get("code")
    if isinstance(call.func, ast.Name) and call.func.id == "TurnFailed":
        message = keywords.get("message")
        if message is not None and code is not None and _falls_back_to(message, code):
            return "the code as the message"
        return None
    detail = args[1] if len(args) > 1 else keywords.get("detail")
    if detail is None:
        return "no detail"
    if isinstance(detail, ast.Constant) and (not isinstance(detail.value, str) or not detail.value.strip()):
        return "an empty detail"
    if isinstance(detail, ast.JoinedStr) and not detail.values:
        return "an empty detail"
    if code is not None and ast.dump(code) == ast.dump(detail):
        return "the code repeated as the detail"
    if code is not None and _falls_back_to(detail, code):
        return "the code as a fallback detail"
    return None


def _falls_back_to(value: ast.expr, code: ast.expr) -> bool:
    """``value`` is ``code``, or ``x or code``."""
    if ast.dump(value) == ast.dump(code):
        return True
    return isinstance(value, ast.BoolOp) and any(ast.dump(v) == ast.dump(code) for v in value.values)


def test_the_walk_finds_construction_sites() -> None:
    # Guards the check itself: if the walk found nothing, it would pass on anything.
    assert len(SOURCES) > 50
    assert sum(len(_sites(path)) for path in SOURCES) > 100


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("AgentrtError('x_y')", "no detail"),
        ("AgentrtError('x_y', '')", "an empty detail"),
        ("AgentrtError('x_y', 'x_y')", "the code repeated as the detail"),
        ("errors.AgentrtError(code, code)", "the code repeated as the detail"),
        ("AgentrtError(exc.code, exc.detail or exc.code)", "the code as a fallback detail"),
        ("AgentrtError('x_y', 'the thing broke')", None),
        ("TurnFailed(code=exc.code, message=exc.detail or exc.code)", "the code as the message"),
        ("TurnFailed(code=exc.code, message=exc.detail)", None),
    ],
)
def test_the_check_itself(source: str, problem: str | None) -> None:
    call = ast.parse(source, mode="eval").body
    assert isinstance(call, ast.Call)
    assert _problem(call) == problem


def test_every_construction_site_has_a_detail_that_says_why() -> None:
    bad = []
    for path in SOURCES:
        for line, call in _sites(path):
            problem = _problem(call)
            if problem:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {problem}")
    assert not bad, "\n".join(bad)
