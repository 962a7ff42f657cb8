"""Errors by family, and the registry of every stable code (agentrt.errors, docs/errors.md).

The registry test scans the core, the plugins and the test kit with ``tools/error_codes.py`` (``ast``:
string literals passed as the code of ``AgentrtError``, ``TurnFailed``, ``Diagnostic``, ``InputError``,
any ``code=`` keyword and functions that take a ``code`` parameter) and fails on a code the registry or
the page lacks.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import pickle
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from agentrt import errors
from agentrt.errors import (
    CODES,
    FAMILIES,
    AgentrtError,
    ConfigError,
    LaunchError,
    ProviderError,
    TurnError,
    code_info,
    family_of,
)
from agentrt.events import Diagnostic, TurnFailed
from agentrt.testing import sample_events

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "errors.md"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("error_codes_tool", ROOT / "tools" / "error_codes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


# -- families ---------------------------------------------------------------------------------


def test_a_registered_code_builds_its_family_and_except_family_catches_it() -> None:
    with pytest.raises(LaunchError) as caught:
        raise AgentrtError("cli_executable_not_found", "AWP_AGENT_CLI_EXECUTABLE is not set")
    exc = caught.value
    assert type(exc) is LaunchError
    assert isinstance(exc, AgentrtError)
    assert (exc.code, exc.detail) == ("cli_executable_not_found", "AWP_AGENT_CLI_EXECUTABLE is not set")
    assert str(exc) == "cli_executable_not_found: AWP_AGENT_CLI_EXECUTABLE is not set"
    with pytest.raises(AgentrtError):
        raise AgentrtError("turn_in_progress", "the previous turn has not ended")
    assert type(AgentrtError(code="config_invalid", detail="x")) is ConfigError


def test_an_unregistered_code_stays_a_plain_agentrt_error() -> None:
    exc = AgentrtError("no_such_code_anywhere", "why")
    assert type(exc) is AgentrtError
    assert family_of("no_such_code_anywhere") is AgentrtError
    # A plugin's own code, raised as the family it means, keeps that family.
    own = LaunchError("my_agent_not_logged_in", "run my-agent login")
    assert type(own) is LaunchError and own.code == "my_agent_not_logged_in"
    # A registered code raised through another family is not moved: the caller chose.
    assert type(ConfigError("spawn_failed", "x")) is ConfigError


def test_codes_with_a_hole_match_their_concrete_codes() -> None:
    assert type(AgentrtError("provider_http_503", "the provider failed")) is ProviderError
    info = code_info("provider_http_503")
    assert info is not None and info.code == "provider_http_<status>"
    # The hole must hold something: the bare prefix is not a code.
    assert code_info("provider_http_") is None


@pytest.mark.parametrize(
    "exc",
    [
        AgentrtError("spawn_failed", "argv[0] must be an absolute path"),
        AgentrtError("provider_http_429", "rate limited"),
        AgentrtError("turn_timeout"),
        AgentrtError("no_such_code_anywhere", "why"),
    ],
    ids=repr,
)
def test_family_and_code_survive_pickle_copy_and_repr(exc: AgentrtError) -> None:
    for clone in (pickle.loads(pickle.dumps(exc)), copy.copy(exc), copy.deepcopy(exc)):
        assert type(clone) is type(exc)
        assert (clone.code, clone.detail, str(clone)) == (exc.code, exc.detail, str(exc))
    assert repr(exc) == f"{type(exc).__name__}({exc.code!r}, {exc.detail!r})"
    assert eval(repr(exc), vars(errors)).code == exc.code  # the repr is the constructor call


def test_a_subclass_with_its_own_constructor_is_left_alone() -> None:
    class Transport(AgentrtError):
        def __init__(self, code: str, detail: str, *, connected: bool) -> None:
            super().__init__(code, detail)
            self.connected = connected

    exc = Transport("control_plane_timeout", "no answer", connected=True)
    assert type(exc) is Transport and exc.connected and exc.code == "control_plane_timeout"


def test_every_family_has_codes_and_advice() -> None:
    for family in FAMILIES:
        assert issubclass(family, AgentrtError)
        assert family.__doc__ and family.action
        assert any(info.family is family for info in CODES.values()), family.__name__
    for info in CODES.values():
        assert info.meaning and "|" not in info.meaning + info.action, info.code


# -- the registry covers every code the sources produce ---------------------------------------


def test_the_scan_finds_codes_of_every_kind(tmp_path: Path) -> None:
    # Guards the scan itself: each way a code is produced is found, and only those.
    pkg = tmp_path / "src" / "agentrt"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text(
        textwrap.dedent(
            """
            CONSTANT_CODE = "from_a_constant"

            def _fail(code, detail):
                raise AgentrtError(code, detail)

            def f(x):
                AgentrtError("raised_literal", "d")
                TurnFailed(code="failure_code", message="m")
                Diagnostic(code=CONSTANT_CODE)
                InputError(code="a" if x else "b_code")
                _fail("through_a_wrapper", "d")
                AgentrtError(f"pattern_{x}", "d")
                AgentrtError("Not A Code", "d")
                print("not_a_code")
                kwargs.get("code", None)

            STOP_CODES = {"stop": "from_a_table"}
            SEEN_CODES = frozenset({"from_a_set"})

            def reason_code(obj, default="from_a_default"):
                if obj:
                    return "returned_code"
                code = f"set_{obj.method.replace('/', '_')}_failed"
                return code

            class Refused(Exception):
                def __init__(self, rpc_code, code, message):
                    super().__init__(message)

            def g():
                raise Refused(-32602, "from_a_class", "m")

            ANSWER = {"error": {"code": "from_a_dict", "detail": "d"}}
            """
        )
    )
    found = TOOL.scan(tmp_path)
    assert set(found) == {
        "from_a_constant",
        "raised_literal",
        "failure_code",
        "a",
        "b_code",
        "through_a_wrapper",
        "pattern_<x>",
        "from_a_table",
        "from_a_set",
        "from_a_default",
        "returned_code",
        "set_<method>_failed",
        "from_a_class",
        "from_a_dict",
    }
    assert found["raised_literal"] == ["src/agentrt/mod.py:8"]


def test_every_code_produced_in_the_sources_is_registered() -> None:
    found = TOOL.scan()
    assert len(found) > 200  # the scan reads the real sources
    missing = sorted(f"{code} ({found[code][0]})" for code in found if code_info(code) is None)
    assert not missing, "add these to src/agentrt/_error_codes.py, then run tools/error_codes.py write:\n" + "\n".join(
        missing
    )


def test_every_registered_code_is_still_produced_somewhere() -> None:
    # A code no source produces any more would document a failure that cannot happen.
    produced = {info.code for info in map(code_info, TOOL.scan()) if info is not None}
    stale = sorted(set(CODES) - produced)
    assert not stale, ("remove these from src/agentrt/_error_codes.py, then run tools/error_codes.py write: "
                       + ", ".join(stale))


def test_the_page_lists_every_code_and_is_up_to_date() -> None:
    text = PAGE.read_text(encoding="utf-8")
    generated = text.partition(TOOL.BEGIN)[2].partition(TOOL.END)[0]
    listed = set(re.findall(r"^\| `([^`]+)` \|", generated, flags=re.MULTILINE))
    assert listed == set(CODES)
    assert text == TOOL.page_with_table(text), (
        "docs/errors.md is stale: run .venv/bin/python tools/error_codes.py write"
    )


def test_the_page_is_in_the_manuals_index() -> None:
    assert "(errors.md)" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")


def test_the_sink_test_kit_uses_only_codes_the_runtime_produces() -> None:
    # It once built a `malformed_output` diagnostic; the runtime's code is `malformed_output_line`.
    codes = [ev.code for ev in sample_events() if isinstance(ev, (Diagnostic, TurnFailed))]
    assert codes and all(code_info(code) is not None for code in codes), codes
    assert "malformed_output_line" in codes


def test_runtime_failure_codes_are_public_and_registered() -> None:
    from agentrt._conversation import RUNTIME_FAILURE_CODES as private

    assert errors.RUNTIME_FAILURE_CODES is private
    assert {"exit_before_result", "spawn_failed", "turn_timeout"} <= errors.RUNTIME_FAILURE_CODES
    assert all(code in CODES for code in errors.RUNTIME_FAILURE_CODES)
    assert type(AgentrtError("turn_timeout")) is TurnError


# -- the page's examples run as printed -------------------------------------------------------


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", ["errors.md", "embedding.md"])
def test_the_except_launch_error_examples_run(page: str) -> None:
    blocks = [b for b in _python_blocks(ROOT / "docs" / page) if "except LaunchError" in b]
    assert blocks
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, page, "exec"), {})  # the page's own example
        assert "cli_executable_not_found" in out.getvalue()


# -- public names an embedder touches ---------------------------------------------------------


def test_the_names_an_embedder_touches_are_public() -> None:
    import agentrt
    from agentrt._conversation import TurnStream
    from agentrt.errors import RUNTIME_FAILURE_CODES
    from agentrt.permissions import PermissionDecision, PermissionRequest

    assert agentrt.TurnStream is TurnStream and "TurnStream" in agentrt.__all__
    assert PermissionRequest.__module__ == PermissionDecision.__module__ == "agentrt.permissions"
    assert RUNTIME_FAILURE_CODES


def test_no_doc_imports_an_underscore_module() -> None:
    private = re.compile(r"^\s*(?:from\s+agentrt\w*\.(?:\w+\.)*_\w+\s+import|import\s+agentrt\w*\.(?:\w+\.)*_\w+)")
    pages = [*(ROOT / "docs").rglob("*.md"), *(ROOT / "docs").rglob("*.py")]
    assert len(pages) > 10
    bad = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if private.match(line) and "/tests/" not in str(page)
    ]
    assert not bad, bad


def test_the_sources_own_error_subclasses_sit_in_their_codes_family() -> None:
    from agentrt._framing import OutputOversize

    exc = OutputOversize()
    assert isinstance(exc, family_of(exc.code)) and isinstance(exc, TurnError)
    client = pytest.importorskip("agentrt_managed_task._client", reason="agentrt-managed-task is not installed")
    failure = client.TransportFailure("control_plane_timeout", "no answer in time", connected=True)
    assert failure.connected
    assert isinstance(failure, family_of(failure.code))
