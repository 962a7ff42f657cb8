"""Meta-test: every test the conformance tables name exists (the tables cannot rot silently).

The area tables cite tests in several styles (``tests/x.py::test_y``, ``::test_y``,
``L::test_y``, ``test_y…``); whatever the style, each ``test_...`` name they mention
must be a test (or the start of one) defined somewhere under ``tests/`` or a plugin's ``plugins/*/tests/``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_DIRS = [ROOT / "tests", *sorted(ROOT.glob("plugins/*/tests"))]
NAME = re.compile(r"\b(test_[A-Za-z0-9_]+)\b")
DEF = re.compile(r"^\s*(?:async\s+)?def (test_[A-Za-z0-9_]+)", re.MULTILINE)


def test_every_test_the_tables_name_exists() -> None:
    defined: set[str] = set()
    for path in (p for tests in TEST_DIRS for p in tests.rglob("*.py")):
        defined.update(DEF.findall(path.read_text(encoding="utf-8")))
    pages = sorted((ROOT / "docs" / "conformance").glob("*.md"))
    assert len(pages) >= 9
    cited: dict[str, str] = {}
    for page in pages:
        for name in NAME.findall(page.read_text(encoding="utf-8")):
            cited.setdefault(name, page.name)
    # Test modules are cited too (test_launch.py); an abbreviated name
    # (`test_startup_errors…`, `test_turn_identity_*`) names the tests it starts.
    known = defined | {p.stem for tests in TEST_DIRS for p in tests.rglob("test_*.py")}
    missing = sorted(
        f"{page}: {name}" for name, page in cited.items() if not any(k.startswith(name) for k in known)
    )
    assert len(cited) > 150, len(cited)
    assert not missing, "\n".join(missing)
