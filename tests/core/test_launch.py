"""LaunchSpec: every launch-contract code, the validation order, argv and the env allowlist."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from agentrt import AgentrtError
from agentrt._launch import (
    SAFE_ENV_KEYS,
    LaunchSpec,
    contains_remote_url,
    is_valid_session_id,
    js_len,
)
from agentrt.dialect import AgentCodec, Dialect, HostCodec
from agentrt.testing import write_fixture_agent


@pytest.fixture
def exe(tmp_path: pathlib.Path) -> str:
    return write_fixture_agent(tmp_path)


def code_of(env: dict[str, str], **kw: object) -> str:
    with pytest.raises(AgentrtError) as info:
        LaunchSpec.from_env(env, **kw)  # type: ignore[arg-type]
    return info.value.code


def base(exe: str, **extra: str) -> dict[str, str]:
    return {"AWP_AGENT_CLI_EXECUTABLE": exe, **extra}


# --- executable -----------------------------------------------------------------------


def test_valid_executable_and_defaults(exe: str) -> None:
    spec = LaunchSpec.from_env(base("  " + exe + "\n"))
    assert spec.executable == exe
    assert spec.prefix_args == ()
    assert dict(spec.env_entries) == {}
    assert spec.protocol == "awp-jsonl"
    assert spec.model is None
    assert spec.remote_opt_in is False


def test_missing_executable_is_not_found() -> None:
    assert code_of({}) == "cli_executable_not_found"
    assert code_of({"AWP_AGENT_CLI_EXECUTABLE": "   "}) == "cli_executable_not_found"


def test_relative_executable(exe: str) -> None:
    assert code_of(base("bin/agent")) == "cli_executable_must_be_absolute"
    assert code_of(base("./agent")) == "cli_executable_must_be_absolute"


def test_nonexistent_executable(tmp_path: pathlib.Path) -> None:
    assert code_of(base(str(tmp_path / "nope"))) == "cli_executable_not_found"
    # A path through a regular file is "not found" too (ENOTDIR).
    f = tmp_path / "file"
    f.write_text("")
    assert code_of(base(str(f / "x"))) == "cli_executable_not_found"


def test_symlink_executable(exe: str, tmp_path: pathlib.Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(exe)
    assert code_of(base(str(link))) == "cli_executable_is_symlink"


def test_symlinked_interpreter_is_refused_when_it_is_one() -> None:
    path = sys.executable
    expected = "cli_executable_is_symlink" if os.path.islink(path) else None
    if expected is None:
        assert LaunchSpec.from_env(base(path)).executable == path
    else:
        assert code_of(base(path)) == expected
        real = os.path.realpath(path)
        assert LaunchSpec.from_env(base(real)).executable == real


def test_directory_and_fifo_are_not_regular(tmp_path: pathlib.Path) -> None:
    assert code_of(base(str(tmp_path))) == "cli_executable_not_regular_file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert code_of(base(str(fifo))) == "cli_executable_not_regular_file"


def test_not_executable(tmp_path: pathlib.Path) -> None:
    f = tmp_path / "plain"
    f.write_text("#!/bin/sh\n")
    f.chmod(0o644)
    assert code_of(base(str(f))) == "cli_executable_not_executable"


def test_executable_is_normalised(exe: str) -> None:
    parent, name = os.path.split(exe)
    spec = LaunchSpec.from_env(base(f"{parent}/./sub/../{name}"))
    assert spec.executable == exe


def test_explicit_executable_overrides_env(exe: str) -> None:
    spec = LaunchSpec.from_env({"AWP_AGENT_CLI_EXECUTABLE": "relative"}, executable=exe)
    assert spec.executable == exe
    assert code_of(base(exe), executable="relative") == "cli_executable_must_be_absolute"


# --- args -----------------------------------------------------------------------------


def test_args_json(exe: str) -> None:
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ARGS_JSON=' ["-x", "a b", "日本"] '))
    assert spec.prefix_args == ("-x", "a b", "日本")
    assert LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ARGS_JSON="  ")).prefix_args == ()


@pytest.mark.parametrize(
    "value",
    [
        "[",
        "not json",
        '{"a": 1}',
        '"str"',
        "[1]",
        '["ok", null]',
        json.dumps(["a"] * 129),
        json.dumps(["a" * 8193]),
        json.dumps(["🎉" * 4097]),  # 4097 non-BMP chars = 8194 UTF-16 code units
        json.dumps(["nul\u0000"]),
    ],
)
def test_invalid_args_json(exe: str, value: str) -> None:
    assert code_of(base(exe, AWP_AGENT_CLI_ARGS_JSON=value)) == "invalid_cli_args_json"


def test_args_limits_are_inclusive(exe: str) -> None:
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ARGS_JSON=json.dumps(["a" * 8192] * 128)))
    assert len(spec.prefix_args) == 128
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ARGS_JSON=json.dumps(["🎉" * 4096])))
    assert spec.prefix_args == ("🎉" * 4096,)


def test_explicit_args_override_env(exe: str) -> None:
    env = base(exe, AWP_AGENT_CLI_ARGS_JSON="broken")
    assert LaunchSpec.from_env(env, args=["--a"]).prefix_args == ("--a",)
    assert LaunchSpec.from_env(env, args='["--b"]').prefix_args == ("--b",)
    assert code_of(base(exe), args=["x", 3]) == "invalid_cli_args_json"


def test_js_len_counts_utf16_code_units() -> None:
    assert js_len("abc") == 3
    assert js_len("é") == 1
    assert js_len("🎉") == 2
    assert js_len("a🎉b") == 4


# --- remote URL rule ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "http://localhost:1/x",
        "HTTP://LOCALHOST:1/x",
        "https://127.0.0.1:8443/v1",
        "http://[::1]:11434/v1",
        "--base=http://localhost/v1 and https://127.0.0.1",
        "http://user@localhost/",
        "no url at all",
        "ftp://example.com",
    ],
)
def test_local_urls(text: str) -> None:
    assert contains_remote_url(text) is False


@pytest.mark.parametrize(
    "text",
    [
        "https://api.openai.com/v1",
        "http://127.0.0.2/",
        "http://0.0.0.0:80",
        "http://localhost.evil/",
        "see http://localhost/ok and https://example.org",
        "http://[::1",  # does not parse
        "http://localhost:99999/",  # invalid port
        "http://evil.com\\@localhost/",  # WHATWG: "\" ends the host
        "url=HTTPS://Example.COM",
        "http://localhost@evil.com/",
    ],
)
def test_remote_urls(text: str) -> None:
    assert contains_remote_url(text) is True


def test_remote_url_in_args_needs_opt_in(exe: str) -> None:
    args = json.dumps(["--api", "https://api.example.com/v1"])
    env = base(exe, AWP_AGENT_CLI_ARGS_JSON=args)
    assert code_of(env) == "remote_api_requires_explicit_opt_in"
    assert code_of({**env, "AWP_AGENT_REMOTE_API_OPT_IN": "true"}) == "remote_api_requires_explicit_opt_in"
    assert code_of({**env, "AWP_AGENT_REMOTE_API_OPT_IN": " 1"}) == "remote_api_requires_explicit_opt_in"
    spec = LaunchSpec.from_env({**env, "AWP_AGENT_REMOTE_API_OPT_IN": "1"})
    assert spec.remote_opt_in is True
    assert spec.prefix_args[1] == "https://api.example.com/v1"


def test_remote_url_in_env_value_needs_opt_in(exe: str) -> None:
    env = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({"BASE_URL": "https://api.example.com"}))
    with pytest.raises(AgentrtError) as info:
        LaunchSpec.from_env(env)
    assert info.value.code == "remote_api_requires_explicit_opt_in"
    assert "api.example.com" not in str(info.value)  # values are never echoed
    assert "BASE_URL" in info.value.detail
    # A URL in a key is not checked (only values are), and local URLs are fine.
    ok = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({"U": "http://127.0.0.1:9/v1"}))
    assert LaunchSpec.from_env(ok).env_entries == {"U": "http://127.0.0.1:9/v1"}
    spec = LaunchSpec.from_env({**env, "AWP_AGENT_REMOTE_API_OPT_IN": "1"})
    assert spec.env_entries == {"BASE_URL": "https://api.example.com"}


# --- model, protocol ------------------------------------------------------------------


def test_model(exe: str) -> None:
    assert LaunchSpec.from_env(base(exe, AWP_AGENT_DEFAULT_MODEL="  gpt-x  ")).model == "gpt-x"
    assert LaunchSpec.from_env(base(exe, AWP_AGENT_DEFAULT_MODEL="   ")).model is None
    assert LaunchSpec.from_env(base(exe, AWP_AGENT_DEFAULT_MODEL="m" * 256)).model == "m" * 256
    assert LaunchSpec.from_env(base(exe), model="explicit").model == "explicit"


@pytest.mark.parametrize("value", ["m" * 257, "🎉" * 129, "a\x00b", "a\x1fb", "a\x7fb", "tab\there"])
def test_invalid_model(exe: str, value: str) -> None:
    assert code_of(base(exe, AWP_AGENT_DEFAULT_MODEL=value)) == "invalid_model"


def test_protocol(exe: str) -> None:
    assert LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_PROTOCOL=" stream-json ")).protocol == "stream-json"
    assert LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_PROTOCOL="")).protocol == "awp-jsonl"
    assert LaunchSpec.from_env(base(exe), protocol="fastagent").protocol == "fastagent"


@pytest.mark.parametrize("value", ["Stream-Json", "-x", "a b", "x" * 65, "é", "a/b"])
def test_invalid_protocol(exe: str, value: str) -> None:
    assert code_of(base(exe, AWP_AGENT_CLI_PROTOCOL=value)) == "invalid_cli_protocol"


# --- env JSON -------------------------------------------------------------------------


def test_env_json(exe: str) -> None:
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ENV_JSON=' {"A_1": "x", "_b": ""} '))
    assert spec.env_entries == {"A_1": "x", "_b": ""}


@pytest.mark.parametrize("value", ["{", "[]", '"s"', "1", "null"])
def test_invalid_env_json(exe: str, value: str) -> None:
    assert code_of(base(exe, AWP_AGENT_CLI_ENV_JSON=value)) == "invalid_cli_env_json"


def test_env_too_large(exe: str) -> None:
    env = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({f"K{i}": "v" for i in range(129)}))
    assert code_of(env) == "cli_env_too_large"
    ok = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({f"K{i}": "v" for i in range(128)}))
    assert len(LaunchSpec.from_env(ok).env_entries) == 128


@pytest.mark.parametrize(
    "entries",
    [{"1A": "v"}, {"A-B": "v"}, {"": "v"}, {"A B": "v"}, {"A=B": "v"}, {"A\n": "v"}, {"A": 1}, {"A": None}],
)
def test_invalid_env_entry(exe: str, entries: dict[str, object]) -> None:
    assert code_of(base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps(entries))) == "invalid_cli_env_entry"


def test_env_value_too_large(exe: str) -> None:
    big = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({"A": "v" * 32769}))
    assert code_of(big) == "cli_env_value_too_large"
    wide = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({"A": "🎉" * 16385}))
    assert code_of(wide) == "cli_env_value_too_large"
    ok = base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps({"A": "🎉" * 16384}))
    assert LaunchSpec.from_env(ok).env_entries["A"] == "🎉" * 16384


def test_env_errors_never_show_values(exe: str) -> None:
    secret = "sk-secret-value-123"
    for entries in ({"A": secret, "B": 3}, {"A": secret * 3000}, {"K": f"https://x.example/{secret}"}):
        with pytest.raises(AgentrtError) as info:
            LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ENV_JSON=json.dumps(entries)))
        assert secret not in str(info.value)
        assert secret not in repr(info.value)


# --- validation order -----------------------------------------------------------------


def test_validation_order(exe: str) -> None:
    everything_wrong = {
        "AWP_AGENT_CLI_EXECUTABLE": "relative",
        "AWP_AGENT_CLI_ARGS_JSON": "[1]",
        "AWP_AGENT_DEFAULT_MODEL": "bad\x00",
        "AWP_AGENT_CLI_PROTOCOL": "BAD",
        "AWP_AGENT_CLI_ENV_JSON": "[",
    }
    assert code_of(everything_wrong) == "cli_executable_must_be_absolute"
    step = {**everything_wrong, "AWP_AGENT_CLI_EXECUTABLE": exe}
    assert code_of(step) == "invalid_cli_args_json"
    step["AWP_AGENT_CLI_ARGS_JSON"] = '["https://remote.example"]'
    assert code_of(step) == "remote_api_requires_explicit_opt_in"
    step["AWP_AGENT_CLI_ARGS_JSON"] = "[]"
    assert code_of(step) == "invalid_model"
    step["AWP_AGENT_DEFAULT_MODEL"] = "m"
    assert code_of(step) == "invalid_cli_protocol"
    step["AWP_AGENT_CLI_PROTOCOL"] = "awp-jsonl"
    assert code_of(step) == "invalid_cli_env_json"
    # Within env JSON: entry errors before the remote-URL rule (checked after all entries).
    step["AWP_AGENT_CLI_ENV_JSON"] = json.dumps({"U": "https://remote.example", "bad key": "v"})
    assert code_of(step) == "invalid_cli_env_entry"


# --- argv -----------------------------------------------------------------------------


def test_argv_shape(exe: str) -> None:
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ARGS_JSON='["-p1", "p2"]', AWP_AGENT_DEFAULT_MODEL="m1"))
    assert spec.argv() == (exe, "-p1", "p2", "--model", "m1")
    compat = ("--output-format", "stream-json", "--input-format", "stream-json", "--print", "--verbose")
    assert spec.argv(compat, resume="sess-1:a.b_c", mcp_config="/tmp/mcp.json") == (
        exe,
        "-p1",
        "p2",
        *compat,
        "--model",
        "m1",
        "--resume",
        "sess-1:a.b_c",
        "--mcp-config",
        "/tmp/mcp.json",
    )
    no_model = LaunchSpec.from_env(base(exe))
    assert no_model.argv(resume="abc") == (exe, "--resume", "abc")


@pytest.mark.parametrize("resume", ["", "has space", "a/b", "x" * 257, "é", "id\n"])
def test_invalid_resume_id(exe: str, resume: str) -> None:
    spec = LaunchSpec.from_env(base(exe))
    with pytest.raises(AgentrtError) as info:
        spec.argv(resume=resume)
    assert info.value.code == "invalid_resume_session_id"


def test_is_valid_session_id() -> None:
    assert is_valid_session_id("a" * 256)
    assert is_valid_session_id("8f0b2c1e-0d8a-4c43-9d0c-5b7e8f6a1c2d")
    assert not is_valid_session_id("a" * 257)
    assert not is_valid_session_id("abc\n")
    assert not is_valid_session_id("")


# --- child env ------------------------------------------------------------------------


def test_child_env_is_allowlist_plus_entries(exe: str) -> None:
    parent = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "SystemRoot": "C:\\Windows",
        "OPENAI_API_KEY": "sk-secret",
        "AWP_SECRET_TOKEN": "t0k3n",
        "AWP_AGENT_CLI_ENV_JSON": "{}",
        "path": "/lowercase/is/another/key",
        "LD_PRELOAD": "/evil.so",
    }
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_CLI_ENV_JSON='{"FOO": "bar", "PATH": "/opt/bin"}'))
    env = spec.child_env(parent)
    assert env == {
        "PATH": "/opt/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "SystemRoot": "C:\\Windows",
        "FOO": "bar",
    }
    assert set(SAFE_ENV_KEYS) >= {"PATH", "HOME", "TMPDIR", "TZ", "USERPROFILE", "COMSPEC"}


class _Dialect(Dialect):
    name = "test"
    compat_args = ("--compat", "x")

    def host_codec(self) -> HostCodec:
        raise NotImplementedError

    def agent_codec(self) -> AgentCodec:
        raise NotImplementedError


def test_process_spec(exe: str, tmp_path: pathlib.Path) -> None:
    spec = LaunchSpec.from_env(base(exe, AWP_AGENT_DEFAULT_MODEL="m", AWP_AGENT_CLI_ENV_JSON='{"X": "1"}'))
    ps = spec.process_spec(
        _Dialect(),
        resume="r1",
        cwd=tmp_path,
        parent_env={"HOME": "/h", "SECRET_TOKEN": "no"},
        shutdown_line=b'{"type":"shutdown"}\n',
    )
    assert ps.argv == (exe, "--compat", "x", "--model", "m", "--resume", "r1")
    assert dict(ps.env) == {"HOME": "/h", "X": "1"}
    assert ps.cwd == str(tmp_path)
    assert ps.shutdown_line == b'{"type":"shutdown"}\n'
    assert ps.stdin is True
    for bad in ("", "a\x00b"):
        with pytest.raises(AgentrtError) as info:
            spec.process_spec(_Dialect(), cwd=bad)
        assert info.value.code == "invalid_working_directory"
    # Default parent env is os.environ, filtered.
    default = spec.process_spec(_Dialect())
    assert set(default.env) <= set(SAFE_ENV_KEYS) | {"X"}
