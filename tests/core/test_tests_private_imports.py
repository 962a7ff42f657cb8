"""Meta-test: tests reach other distributions through public names, save a few deliberate white-box tests.

A test belongs to the distribution whose tests directory holds it: ``tests/`` is the core's,
``plugins/<dist>/tests/`` that plugin's.  Importing a private module (a path with a ``_name`` part,
or ``from pkg import _name``) of *another* distribution ties the test to that distribution's insides,
so neither can be tested or released alone.  Each such import that remains is listed in
:data:`WHITE_BOX` with the reason it is deliberate; there are at most :data:`LIMIT` of them, and a
new one fails here, named, until it uses a public name (``agentrt``, ``agentrt.lowlevel``,
``agentrt.testing``, a plugin's ``api`` module) or is argued for in the list.

The checker is tried on small sources first, so that a clean tree cannot hide a checker that finds nothing.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 40

#: (test file, private module it imports) -> why the test looks inside on purpose.
WHITE_BOX: dict[tuple[str, str], str] = {
    ("plugins/agentrt-acp/tests/test_acp_codec.py", "agentrt._line_parse"):
        "the core's per-object decode step (decode_objects) drives the host codec over captures, with no process",
    ("plugins/agentrt-acp/tests/test_acp_decode_lines.py", "agentrt._line_parse"):
        "ACP's chunked decode_lines is held equal to the core's plain decode (decode_objects)",
    ("plugins/agentrt-stream-json/tests/test_stream_json_memory.py", "agentrt._line_parse"):
        "what the host keeps between lines is measured through the core's plain decode (decode_objects)",
    ("tests/dialects/test_acp_bridge_hosted.py", "agentrt_acp._setup"):
        "the session set-up requests the bridge relies on, unit by unit, beside the bridge's own tests",
    ("tests/dialects/test_acp_bridge_hosted.py", "agentrt_acp._session_options"):
        "which hosted modes and option categories the bridge's client may see, unit by unit",
    ("tests/dialects/test_decode_lines.py", "agentrt_stream_json._host_stream"):
        "the host codec's retention bound (_KEEP_MESSAGES) is the figure under test",
    ("tests/dialects/test_lazy_payloads.py", "agentrt_stream_json._typed"):
        "the typed tool arguments are decoded lazily: the laziness is the behaviour under test",
}


def _packages(dist_dir: Path) -> set[str]:
    src = dist_dir / "src"
    return {p.name for p in src.iterdir() if p.is_dir() and p.name.isidentifier() and not p.name.startswith("_")}


def _is_private(parts: list[str]) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in parts)


def _imported(source: str) -> list[tuple[int, str]]:
    """(line, module) for each private module an import names, ``from pkg import _x`` and import_module included."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_private(node.module.split(".")[1:]):
                found.append((node.lineno, node.module))
            else:
                found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def cross_private_imports(source: str, own: set[str]) -> list[tuple[int, str]]:
    """The private modules of distributions other than ``own`` (top-level package names) that ``source`` imports."""
    out = []
    for line, module in _imported(source):
        top, *rest = module.split(".")
        if (top == "agentrt" or top.startswith("agentrt_")) and top not in own and _is_private(rest):
            out.append((line, module))
    return out


def _test_files() -> list[tuple[Path, set[str]]]:
    files = [(p, {"agentrt"}) for p in sorted((ROOT / "tests").rglob("*.py"))]
    for tests in sorted(ROOT.glob("plugins/*/tests")):
        own = _packages(tests.parent)
        files += [(p, own) for p in sorted(tests.rglob("*.py"))]
    return files


def _found() -> collections.Counter[tuple[str, str]]:
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for path, own in _test_files():
        rel = path.relative_to(ROOT).as_posix()
        for _line, module in cross_private_imports(path.read_text("utf-8"), own):
            found[(rel, module)] += 1
    return found


@pytest.mark.parametrize(
    ("source", "own", "expected"),
    [
        ("from agentrt._line_parse import decode_objects\n", {"agentrt_acp"}, ["agentrt._line_parse"]),
        ("import agentrt.testing._pids\n", {"agentrt_web"}, ["agentrt.testing._pids"]),
        ("from agentrt_acp._agent import AcpAgentCodec\n", {"agentrt"}, ["agentrt_acp._agent"]),
        ("from agentrt_web import _security\n", {"agentrt_sqlite"}, ["agentrt_web._security"]),
        ("def f():\n    from agentrt_sqlite._store import S\n", {"agentrt"}, ["agentrt_sqlite._store"]),
        ("importlib.import_module('agentrt_tui._sink')\n", {"agentrt"}, ["agentrt_tui._sink"]),
        ("from agentrt_acp._agent import AcpAgentCodec\n", {"agentrt_acp"}, []),
        ("from agentrt._line_parse import decode_objects\n", {"agentrt"}, []),
        ("from agentrt.lowlevel import JsonlReader\nfrom agentrt_sqlite.api import SqliteSink\n", {"agentrt_web"}, []),
        ("from agentrt import __version__\nimport trio._core\n", {"agentrt_web"}, []),
    ],
)
def test_the_checker_finds_private_imports_of_other_distributions(
    source: str, own: set[str], expected: list[str]
) -> None:
    assert [module for _, module in cross_private_imports(source, own)] == expected


def test_the_scan_sees_the_core_and_every_plugin_tests_directory() -> None:
    files = _test_files()
    assert len(files) > 200
    plugin_dirs = {p.relative_to(ROOT).parts[1] for p, _ in files if p.relative_to(ROOT).parts[0] == "plugins"}
    assert {"agentrt-web", "agentrt-sqlite", "agentrt-openai", "agentrt-managed-task", "agentrt-tui"} <= plugin_dirs


def test_private_imports_across_distributions_are_the_listed_white_box_tests() -> None:
    found = _found()
    new = sorted(f"{path}: {module}" for path, module in found if (path, module) not in WHITE_BOX)
    assert not new, (
        "tests import other distributions' private modules; use a public name, or list the import in "
        "WHITE_BOX with the reason it is deliberate:\n" + "\n".join(new)
    )
    assert sum(found.values()) <= LIMIT, sum(found.values())
    assert len(WHITE_BOX) <= LIMIT


def test_every_listed_white_box_import_is_still_made() -> None:
    found = _found()
    gone = sorted(f"{path}: {module}" for path, module in WHITE_BOX if (path, module) not in found)
    assert not gone, "no longer imported (or the test moved): update WHITE_BOX:\n" + "\n".join(gone)
