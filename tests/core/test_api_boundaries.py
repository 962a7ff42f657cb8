"""Meta-tests on the API boundaries between distributions.

* Plugins and benches import only the core's public names (``agentrt``,
  ``agentrt.lowlevel``, ``agentrt.events``...), never an ``agentrt._x`` module.
* No distribution imports another distribution's private module
  (``agentrt_awp_jsonl._typed`` from stream-json, say); its own are fine.
* Every name :mod:`agentrt.lowlevel` exports is documented, in its docstring
  and in ``docs/lowlevel.md``.

The checker is tested on small sources first, so that a clean tree cannot
hide a checker that finds nothing.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
from pathlib import Path

import pytest

import agentrt.lowlevel

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(source: str) -> list[tuple[int, str]]:
    """Every absolute module an import statement or ``importlib.import_module("...")`` names."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            # `from agentrt import _framing` names a private module too.
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


def violations(source: str, own_package: str | None) -> list[str]:
    """The private imports ``source`` makes that a module of ``own_package`` may not.

    ``own_package`` is the top-level package of the distribution the module
    belongs to (``None`` for a bench module, which belongs to none).
    """
    out: list[str] = []
    for line, module in _imported_modules(source):
        top, *rest = module.split(".")
        if top != "agentrt" and not top.startswith("agentrt_"):
            continue
        if top == own_package:
            continue
        if any(part.startswith("_") and not part.startswith("__") for part in rest):
            out.append(f"line {line}: {module}")
    return out


def _modules() -> list[tuple[Path, str | None]]:
    out: list[tuple[Path, str | None]] = []
    # The plugin distributions and the guide's example plugins (third-party code, held to the same rule).
    for src in sorted(ROOT.glob("plugins/*/src")) + sorted(ROOT.glob("docs/examples/*/src")):
        for path in sorted(src.rglob("*.py")):
            out.append((path, path.relative_to(src).parts[0]))
    out.extend((path, None) for path in sorted((ROOT / "bench").rglob("*.py")))
    return out


@pytest.mark.parametrize(
    ("source", "own", "expected"),
    [
        ("from agentrt._process import open_process", "agentrt_x", ["line 1: agentrt._process"]),
        ("import agentrt._framing as f", None, ["line 1: agentrt._framing"]),
        ("from agentrt import _plugins", "agentrt_x", ["line 1: agentrt._plugins"]),
        ("def f():\n    from agentrt._exception_groups import collapse_single_group", None,
         ["line 2: agentrt._exception_groups"]),
        ("import importlib\nimportlib.import_module('agentrt._launch')", None, ["line 2: agentrt._launch"]),
        ("from agentrt_awp_jsonl._typed import typed_loader", "agentrt_stream_json",
         ["line 1: agentrt_awp_jsonl._typed"]),
        ("from agentrt_sqlite._sink import SqliteSink", None, ["line 1: agentrt_sqlite._sink"]),
        # allowed: public names, a distribution's own private modules, dunder modules, other projects
        ("from agentrt.lowlevel import open_process\nfrom agentrt import get_plugins", "agentrt_x", []),
        ("from agentrt_stream_json._typed import load_line", "agentrt_stream_json", []),
        ("from agentrt_awp_jsonl.typed import typed_loader\nimport agentrt.__main__", "agentrt_stream_json", []),
        ("from openai._streaming import SSEDecoder\nfrom . import _sink", None, []),
    ],
)
def test_the_checker_finds_private_imports(source: str, own: str | None, expected: list[str]) -> None:
    assert violations(source, own) == expected


def test_plugins_and_benches_import_only_public_names_of_other_distributions() -> None:
    modules = _modules()
    assert len(modules) > 60, "the plugin and bench sources were not found"
    bad = [
        f"{path.relative_to(ROOT)} {v}"
        for path, own in modules
        for v in violations(path.read_text(encoding="utf-8"), own)
    ]
    assert not bad, "private imports across a distribution boundary:\n" + "\n".join(bad)


def test_the_packages_agentrt_plugin_new_writes_import_only_public_names(tmp_path: Path) -> None:
    from agentrt._plugin_new import KINDS, plugin_names, write_plugin

    for kind in KINDS:
        written = write_plugin(kind, f"acme-{kind}", tmp_path / kind)
        sources = [p for p in written if p.suffix == ".py"]
        assert len(sources) >= 3
        own = plugin_names(f"acme-{kind}").package
        bad = [f"{p.relative_to(tmp_path)} {v}" for p in sources
               for v in violations(p.read_text(encoding="utf-8"), own)]
        assert not bad, "private imports in a generated plugin:\n" + "\n".join(bad)


def _constant_docstrings() -> dict[str, str]:
    """``NAME = value`` followed by a string literal, in the modules :mod:`agentrt.lowlevel` re-exports."""
    lowlevel = ast.parse(inspect.getsource(agentrt.lowlevel))
    homes = {f"agentrt.{node.module}" for node in lowlevel.body if isinstance(node, ast.ImportFrom) and node.level}
    docs: dict[str, str] = {}
    for home in sorted(homes):
        body = ast.parse(inspect.getsource(importlib.import_module(home))).body
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.Assign)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs.update((t.id, after.value.value) for t in node.targets if isinstance(t, ast.Name))
    return docs


@pytest.mark.parametrize("name", sorted(agentrt.lowlevel.__all__))
def test_every_lowlevel_name_has_a_docstring_and_is_in_the_docs(name: str) -> None:
    value = getattr(agentrt.lowlevel, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        doc = inspect.getdoc(value) or ""
        # a class without its own docstring inherits object's; that does not count
        assert doc and doc != inspect.getdoc(object), f"{name} has no docstring"
    else:  # a constant: documented by the string literal after its assignment, where it is defined
        assert name in _constant_docstrings(), f"the constant {name} has no docstring"
    page = (ROOT / "docs" / "lowlevel.md").read_text(encoding="utf-8")
    assert f"`{name}`" in page, f"{name} is not in docs/lowlevel.md"


def test_lowlevel_exports_exactly_its_all() -> None:
    public = {n for n in vars(agentrt.lowlevel) if not n.startswith("_") and n != "annotations"}
    assert public == set(agentrt.lowlevel.__all__)


def test_every_import_of_another_plugin_package_is_a_declared_dependency() -> None:
    """A plugin importing another plugin's package declares it (a dependency or an extra) in its pyproject."""
    import tomllib

    bad: list[str] = []
    checked = 0
    for pyproject in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        reqs = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            reqs.extend(extra)
        allowed = {r.split("[")[0].split(">")[0].split("=")[0].strip().replace("-", "_") for r in reqs}
        src = pyproject.parent / "src"
        for path in sorted(src.rglob("*.py")):
            own = path.relative_to(src).parts[0]
            for line, module in _imported_modules(path.read_text(encoding="utf-8")):
                top = module.split(".")[0]
                if top.startswith("agentrt_") and top != own:
                    checked += 1
                    if top not in allowed:
                        bad.append(f"{path.relative_to(ROOT)}:{line} imports {top}, not declared by {project['name']}")
    assert checked >= 2, "no cross-plugin import found: the scan is broken"
    assert not bad, "\n".join(bad)
