"""LaunchSpec's per-spawn work: one lstat while the executable is unchanged, a full check after any swap.

The verdict of a full check (regular file, not a symlink, executable) is kept
with the ``lstat`` it saw; a later check whose ``lstat`` differs in any way
checks in full again, so a swapped, removed or ``chmod``-ed executable still
gets its launch-contract code.  The child's environment is built once per
spec while the allow-listed parent values stay the same.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from typing import Any, cast

import pytest

from agentrt import AgentrtError, LaunchSpec
from agentrt._plugins import Plugins
from agentrt.testing import write_fixture_agent

PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl"})


class Calls:
    """Counts the calls of ``os.<name>`` (still calling it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.count = 0
        real: Callable[..., Any] = getattr(os, name)

        def counting(*args: Any, **kw: Any) -> Any:
            self.count += 1
            return real(*args, **kw)

        monkeypatch.setattr(os, name, counting)


def code_of(spec: LaunchSpec) -> str:
    with pytest.raises(AgentrtError) as info:
        spec.check_executable()
    return info.value.code


@pytest.fixture
def spec(tmp_path: pathlib.Path) -> LaunchSpec:
    return LaunchSpec.from_env({}, executable=write_fixture_agent(tmp_path))


def test_an_unchanged_executable_costs_one_lstat_per_check(spec: LaunchSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    lstat, access = Calls(monkeypatch, "lstat"), Calls(monkeypatch, "access")
    for _ in range(3):
        spec.check_executable()
    # from_env's full check counts as the first: no access() again, one lstat per spawn.
    assert (lstat.count, access.count) == (3, 0)


def test_a_spec_built_directly_is_checked_in_full_once(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = write_fixture_agent(tmp_path)
    spec = LaunchSpec(executable=exe)
    access = Calls(monkeypatch, "access")
    spec.check_executable()
    spec.check_executable()
    assert access.count == 1


def test_swapped_for_a_symlink_is_refused(spec: LaunchSpec, tmp_path: pathlib.Path) -> None:
    spec.check_executable()
    exe = pathlib.Path(spec.executable)
    good = pathlib.Path(write_fixture_agent(tmp_path, name="other"))
    exe.unlink()
    exe.symlink_to(good)
    assert code_of(spec) == "cli_executable_is_symlink"


def test_removed_is_not_found_and_a_new_file_is_checked_afresh(spec: LaunchSpec, tmp_path: pathlib.Path) -> None:
    spec.check_executable()
    exe = pathlib.Path(spec.executable)
    body = exe.read_bytes()
    exe.unlink()
    assert code_of(spec) == "cli_executable_not_found"
    exe.write_bytes(body)  # back, but without the execute permission
    assert code_of(spec) == "cli_executable_not_executable"
    exe.chmod(0o755)
    spec.check_executable()


def test_chmod_in_place_is_not_executable(spec: LaunchSpec) -> None:
    spec.check_executable()
    os.chmod(spec.executable, 0o644)
    assert code_of(spec) == "cli_executable_not_executable"
    os.chmod(spec.executable, 0o755)
    spec.check_executable()


def test_swapped_for_a_directory_is_not_a_regular_file(spec: LaunchSpec) -> None:
    spec.check_executable()
    os.unlink(spec.executable)
    os.mkdir(spec.executable)
    assert code_of(spec) == "cli_executable_not_regular_file"


def test_a_failed_check_is_not_remembered(spec: LaunchSpec) -> None:
    os.chmod(spec.executable, 0o644)
    assert code_of(spec) == "cli_executable_not_executable"
    # The same refused file again: checked in full again (the refusal is not cached as a pass).
    assert code_of(spec) == "cli_executable_not_executable"


def test_the_child_env_is_shared_while_the_parent_values_stay_the_same(spec: LaunchSpec) -> None:
    dialect = PLUGINS.dialect("awp-jsonl")
    spec = LaunchSpec.from_env({}, executable=spec.executable, env={"TOKEN_X": "t"})
    parent = {"PATH": "/usr/bin", "HOME": "/h", "SECRET": "s"}
    first = spec.process_spec(dialect, parent_env=parent)
    second = spec.process_spec(dialect, parent_env=dict(parent))
    assert first.env is second.env
    assert dict(first.env) == {"PATH": "/usr/bin", "HOME": "/h", "TOKEN_X": "t"}
    with pytest.raises(TypeError):
        cast(Any, first.env)["SECRET"] = "s"  # read-only: one spawn cannot change another's
    # A changed allow-listed value (or one more) builds it again; a variable outside the list does not count.
    changed = spec.process_spec(dialect, parent_env={**parent, "HOME": "/other", "LANG": "C"})
    assert dict(changed.env) == {"PATH": "/usr/bin", "HOME": "/other", "LANG": "C", "TOKEN_X": "t"}
    assert spec.process_spec(dialect, parent_env={**parent, "SECRET": "t2"}).env == first.env
    assert "SECRET" not in spec.process_spec(dialect, parent_env={**parent, "SECRET": "t2"}).env


def test_the_memo_is_not_part_of_the_spec(spec: LaunchSpec) -> None:
    import attrs

    twin = LaunchSpec(executable=spec.executable)
    spec.check_executable()
    assert spec == twin and "_memo=" not in repr(spec)
    assert attrs.evolve(spec, model="m")._memo is not spec._memo


def test_a_used_spec_still_copies_and_pickles(spec: LaunchSpec) -> None:
    import copy
    import pickle

    spec.check_executable()
    spec.process_spec(PLUGINS.dialect("awp-jsonl"), parent_env={"PATH": "/bin"})
    for twin in (copy.deepcopy(spec), pickle.loads(pickle.dumps(spec)), copy.copy(spec)):
        assert twin == spec
        twin.check_executable()  # its own memo: a full check first
