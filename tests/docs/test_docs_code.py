"""Every Python block in the manual runs as printed, or is a marked fragment whose names all resolve.

Sybil reads the Markdown: each ```python block of a page runs in order in one namespace (blocks with a
top-level ``await`` or ``async with`` run inside ``trio.run``).  A block that needs a real agent CLI, a
network or a particular environment carries ``<!-- skip: next "why" -->`` just above it; it is not run,
but pyflakes still checks it: every name it uses must be defined or imported in it or in an earlier
block of the same page.  The pages run from the checkout's root, so ``docs/examples/echo_agent.py``
is the agent a runnable block starts.
"""

from __future__ import annotations

import ast
import gc
import inspect
from collections.abc import Iterator
from pathlib import Path
from unittest import SkipTest

import pytest
import trio
from pyflakes import checker, messages  # type: ignore[import-untyped]
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[2]


def _run_block(example: Example) -> None:
    """Run one block; code with a top-level await runs inside ``trio.run``."""
    source = "\n" * (example.line + example.parsed.line_offset) + example.parsed
    code = compile(source, example.path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    namespace = example.namespace
    if inspect.CO_COROUTINE & code.co_flags:

        async def main() -> None:
            await eval(code, namespace)

        trio.run(main)
    else:
        exec(code, namespace)
    namespace.pop("__builtins__", None)


_SYBIL = Sybil(parsers=[CodeBlockParser(language="python", evaluator=_run_block), SkipParser()], path=str(ROOT))


def _pages() -> list[Path]:
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    return [page for page in pages if "```python" in page.read_text(encoding="utf-8")]


def _is_code(example: Example) -> bool:
    return example.region.evaluator is _run_block


def undefined_names(sources: list[str]) -> list[str]:
    """Names the last of ``sources`` uses that neither it nor an earlier one defines or imports."""
    before = "\n".join(sources[:-1])
    offset = before.count("\n") + 1 if sources[:-1] else 0
    tree = ast.parse((before + "\n" if sources[:-1] else "") + sources[-1])
    found = checker.Checker(tree, withDoctest=False).messages
    return sorted({m.message_args[0] for m in found if isinstance(m, messages.UndefinedName) and m.lineno > offset})


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(ROOT)
    thresholds = gc.get_threshold()  # a block may tune the process-wide collector
    yield
    gc.set_threshold(*thresholds)


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_python_blocks_run_or_are_marked_fragments(page: Path, at_root: None) -> None:
    document = _SYBIL.parse(page)
    sources: list[str] = []
    ran = fragments = 0
    for example in document:
        if _is_code(example):
            sources.append(str(example.parsed))
            where = f"{page.relative_to(ROOT)}:{example.line}"
            try:
                missing = undefined_names(sources)
            except SyntaxError as exc:
                pytest.fail(f"{where}: the block is not Python: {exc}")
            assert not missing, f"{where}: uses names it never defines or imports: {', '.join(missing)}"
        elif example.parsed[0] == "next" and not example.parsed[1]:
            pytest.fail(f'{page.relative_to(ROOT)}:{example.line}: a skipped block must say why (skip: next "why")')
        try:
            example.evaluate()
        except SkipTest:
            fragments += 1
            continue
        except Exception as exc:
            where = f"{page.relative_to(ROOT)}:{example.line}"
            raise AssertionError(f"{where}: the block fails as printed: {exc!r}") from exc
        if _is_code(example):
            ran += 1
    assert ran + fragments == len(sources)


def test_the_pages_with_python_are_all_checked() -> None:
    pages = {str(page.relative_to(ROOT)) for page in _pages()}
    assert {"README.md", "docs/embedding.md", "docs/plugin-guide.md", "docs/errors.md"} <= pages


def test_the_name_check_catches_an_undefined_name() -> None:
    assert undefined_names(["import trio\n", "trio.run(main)\nprint(spec)\n"]) == ["main", "spec"]
    assert undefined_names(["spec = 1\n", "print(spec)\n"]) == []
