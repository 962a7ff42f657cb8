"""``LaunchSpec.from_env(environ, env={...})``: the child's entries as a mapping, checked as the JSON is."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from agentrt import LaunchSpec
from agentrt.errors import AgentrtError, LaunchError

EXE = os.path.realpath(sys.executable)


def test_the_mapping_becomes_the_childs_entries() -> None:
    spec = LaunchSpec.from_env({}, executable=EXE, env={"MY_AGENT_MODE": "fast", "OTHER": ""})
    assert dict(spec.env_entries) == {"MY_AGENT_MODE": "fast", "OTHER": ""}
    child = spec.child_env({"PATH": "/usr/bin", "SECRET": "x"})
    assert child["MY_AGENT_MODE"] == "fast" and "SECRET" not in child


def test_the_mapping_replaces_the_json_variable_and_the_first_argument_is_positional_only() -> None:
    environ = {"AWP_AGENT_CLI_EXECUTABLE": EXE, "AWP_AGENT_CLI_ENV_JSON": json.dumps({"FROM_JSON": "1"})}
    assert dict(LaunchSpec.from_env(environ).env_entries) == {"FROM_JSON": "1"}
    assert dict(LaunchSpec.from_env(environ, env={"FROM_MAPPING": "2"}).env_entries) == {"FROM_MAPPING": "2"}
    assert dict(LaunchSpec.from_env(environ, env={}).env_entries) == {}
    with pytest.raises(TypeError):
        LaunchSpec.from_env(environ={}, executable=EXE)  # type: ignore[call-arg]


BAD_ENTRIES: list[tuple[str, Mapping[str, object]]] = [
    ("invalid_cli_env_entry", {"1BAD": "x"}),
    ("invalid_cli_env_entry", {"GOOD": 3}),
    ("invalid_cli_env_entry", {"GOOD": "a\x00b"}),
    ("cli_env_value_too_large", {"BIG": "x" * 70000}),
    ("cli_env_too_large", {f"K{i}": "v" for i in range(300)}),
    ("remote_api_requires_explicit_opt_in", {"API": "https://api.example.com/v1"}),
]


@pytest.mark.parametrize(("code", "entries"), BAD_ENTRIES, ids=[c for c, _ in BAD_ENTRIES])
def test_a_bad_mapping_fails_exactly_as_the_same_json_does(code: str, entries: Mapping[str, object]) -> None:
    with pytest.raises(AgentrtError) as as_json:
        LaunchSpec.from_env({"AWP_AGENT_CLI_EXECUTABLE": EXE, "AWP_AGENT_CLI_ENV_JSON": json.dumps(entries)})
    with pytest.raises(LaunchError) as as_mapping:
        LaunchSpec.from_env({}, executable=EXE, env=entries)  # type: ignore[arg-type]
    assert as_json.value.code == as_mapping.value.code == code
    # The detail names where the entries came from, never a value.
    assert "env" in as_mapping.value.detail
    for value in entries.values():
        if isinstance(value, str) and len(value) > 3:
            assert value not in as_mapping.value.detail


def test_the_remote_opt_in_of_the_environment_applies_to_the_mapping() -> None:
    spec = LaunchSpec.from_env(
        {"AWP_AGENT_REMOTE_API_OPT_IN": "1"}, executable=EXE, env={"API": "https://api.example.com/v1"}
    )
    assert spec.env_entries["API"] == "https://api.example.com/v1"


def test_a_non_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as caught:
        LaunchSpec.from_env({}, executable=EXE, env=["A=1"])  # type: ignore[arg-type]
    assert caught.value.code == "invalid_cli_env_json"
