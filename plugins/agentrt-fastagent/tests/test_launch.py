"""Launch contract: binary resolution, argv, the child environment, profiles, directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import trio

from agentrt import AgentrtError
from agentrt_fastagent._launch import (
    SAFE_INHERITED_ENV,
    LlmProfile,
    SandboxConfig,
    build_argv,
    build_env,
    check_binary,
    check_bot_id,
    default_binary_candidates,
    instance_paths,
    resolve_binary,
)

from .conftest import PROFILE, make_binary, resolver

PARENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/someone",
    "LANG": "C.UTF-8",
    "https_proxy": "http://proxy.local:3128",
    "NO_PROXY": "localhost",
    "TZ": "",  # empty: not inherited
    "DATABASE_URL": "postgres://secret@db/x",
    "BETTER_AUTH_SECRET": "auth-secret",
    "WEB_ADMIN_EMAILS": "a@b.c",
    "FASTAGENT_BASE_URL": "https://inherited.example",
    "FASTAGENT_API_TYPE": "inherited",
    "SANDBOX_URL": "http://inherited-sandbox",
    "SANDBOX_API_KEY": "inherited-key",
    "OPENAI_API_KEY": "sk-parent",
    "AWS_SECRET_ACCESS_KEY": "aws",
}


async def test_child_env_argv_and_cwd_dumped_by_fixture(tmp_path: Path, sup_factory, store, recorder) -> None:
    dump = tmp_path / "dump.json"
    binary = make_binary(tmp_path / "bin", "restored_happy", env_dump=str(dump))
    async with sup_factory(binary, parent_env=PARENT) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        await sup.request_stop("b1")
        await recorder.wait_state("b1", "stopped")
    got = json.loads(dump.read_text())
    env = got["env"]
    root = tmp_path / "instances" / "b1"
    assert got["argv"] == ["--channel", "weixin", "--output", "jsonl"]
    assert got["cwd"] == str(root / "workspace")
    for name in ("DATABASE_URL", "BETTER_AUTH_SECRET", "WEB_ADMIN_EMAILS", "FASTAGENT_BASE_URL",
                 "FASTAGENT_API_TYPE", "SANDBOX_URL", "SANDBOX_API_KEY", "OPENAI_API_KEY",
                 "AWS_SECRET_ACCESS_KEY", "TZ"):  # fmt: skip
        assert name not in env, name
    assert env["https_proxy"] == "http://proxy.local:3128" and env["NO_PROXY"] == "localhost"
    assert env["FASTAGENT_API_KEY"] == PROFILE.api_key
    assert env["FASTAGENT_MODEL"] == "gpt-test" and env["FASTAGENT_PROVIDER"] == "openai"
    assert env["IM_GATEWAY_AGENT_ID"] == "b1" and env["IM_GATEWAY_ALLOW_ALL_PERMISSIONS"] == "true"
    assert env["IM_GATEWAY_DATA_DIR"] == str(root / "data")
    assert env["IM_GATEWAY_WORKSPACE_DIR"] == str(root / "workspace")
    allowed = set(SAFE_INHERITED_ENV) | {
        "FASTAGENT_API_KEY", "FASTAGENT_MODEL", "FASTAGENT_PROVIDER", "IM_GATEWAY_AGENT_ID",
        "IM_GATEWAY_ALLOW_ALL_PERMISSIONS", "IM_GATEWAY_DATA_DIR", "IM_GATEWAY_WORKSPACE_DIR",
    }  # fmt: skip
    # Python itself may add LC_CTYPE under a C locale; nothing else may appear.
    assert set(env) - allowed <= {"LC_CTYPE"}
    assert (root / "logs").is_dir() and (root / "data" / "skills").is_dir()


async def test_remote_sandbox_command_and_env(tmp_path: Path, sup_factory, store, recorder) -> None:
    dump = tmp_path / "dump.json"
    binary = make_binary(tmp_path / "bin", "restored_happy", env_dump=str(dump))
    sandbox = SandboxConfig(mode="remote", url="http://sandbox-runtime:7001", api_key="srt-key")
    profile = LlmProfile(name="p", provider="openai", model="m", api_key="k", base_url="https://llm.example",
                         api_type="openai-chat")  # fmt: skip
    async with sup_factory(binary, parent_env=PARENT, resolve=resolver(profile, sandbox)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
    got = json.loads(dump.read_text())
    assert got["argv"] == ["--channel", "weixin", "--sandbox", "remote", "--sandbox-url",
                           "http://sandbox-runtime:7001", "--output", "jsonl"]  # fmt: skip
    env = got["env"]
    assert env["SANDBOX_URL"] == "http://sandbox-runtime:7001" and env["SANDBOX_API_KEY"] == "srt-key"
    assert env["FASTAGENT_BASE_URL"] == "https://llm.example" and env["FASTAGENT_API_TYPE"] == "openai-chat"


def test_build_env_pure() -> None:
    paths = instance_paths(Path("/x"), "b1")
    env = build_env(bot_id="b1", profile=PROFILE, sandbox=SandboxConfig(), paths=paths, parent_env=PARENT)
    assert "SANDBOX_URL" not in env and "FASTAGENT_BASE_URL" not in env
    assert env["PATH"] == "/usr/bin:/bin" and "TZ" not in env
    with pytest.raises(AgentrtError) as info:
        build_env(bot_id="b1", profile=None, sandbox=SandboxConfig(), paths=paths, parent_env={})
    assert info.value.code == "llm_profile_required"
    for blank in ({"api_key": " "}, {"model": ""}, {"provider": ""}):
        bad = LlmProfile(**{"name": "p", "provider": "o", "model": "m", "api_key": "k", **blank})
        with pytest.raises(AgentrtError) as info:
            build_env(bot_id="b1", profile=bad, sandbox=SandboxConfig(), paths=paths, parent_env={})
        assert info.value.code == "llm_profile_invalid"
        assert "k" not in info.value.detail.split() and "sk-" not in info.value.detail
    assert "sk-test-secret-value" not in repr(PROFILE)


def test_argv_modes() -> None:
    b = Path("/opt/fastagent")
    assert build_argv(b, SandboxConfig()) == ("/opt/fastagent", "--channel", "weixin", "--output", "jsonl")
    with pytest.raises(AgentrtError) as info:
        build_argv(b, SandboxConfig(mode="remote"))
    assert info.value.code == "sandbox_config_invalid"
    with pytest.raises(AgentrtError):
        build_argv(b, SandboxConfig(mode="cloud"))  # type: ignore[arg-type]


def test_binary_resolution(tmp_path: Path) -> None:
    assert resolve_binary({"FASTAGENT_BINARY_PATH": "/nope/fastagent"}) == Path("/nope/fastagent")
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    cands = default_binary_candidates(env)
    assert cands[-1] == tmp_path / "xdg" / "agentrt" / "fastagent" / "bin" / "fastagent"
    if not cands[0].exists():
        with pytest.raises(AgentrtError) as info:
            resolve_binary(env)
        assert info.value.code == "fastagent_start_failed"
        installed = make_binary(cands[-1].parent)
        assert resolve_binary(env) == installed
    with pytest.raises(AgentrtError, match="not found") as info:
        check_binary(tmp_path / "missing")
    assert info.value.code == "fastagent_binary_not_found"
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/false\n")
    with pytest.raises(AgentrtError, match="not executable") as info:
        check_binary(plain)
    assert info.value.code == "fastagent_binary_not_executable"
    with pytest.raises(AgentrtError, match="not a regular file") as info:
        check_binary(tmp_path)
    assert info.value.code == "fastagent_binary_not_regular_file"
    with pytest.raises(AgentrtError) as info:
        check_binary(Path("relative/fastagent"))
    assert info.value.code == "fastagent_binary_not_absolute"


def test_symlinked_binary_is_refused(tmp_path: Path) -> None:
    real = make_binary(tmp_path / "bin")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(AgentrtError, match="symbolic link") as info:
        check_binary(link)
    assert info.value.code == "fastagent_binary_is_symlink"


@pytest.mark.parametrize("bad", ["", "..", "a/b", ".hidden", "x" * 65, "a b", "a\0b"])
def test_bot_ids(bad: str) -> None:
    with pytest.raises(AgentrtError) as info:
        check_bot_id(bad)
    assert info.value.code == "invalid_bot_id"
    assert check_bot_id("bot_fresh-contract.1") == "bot_fresh-contract.1"


@pytest.mark.parametrize(
    ("binary_kind", "code"), [("missing", "FASTAGENT_START_FAILED"), ("noexec", "FASTAGENT_START_FAILED")]
)
async def test_start_failure_marks_failed(tmp_path: Path, sup_factory, store, recorder, binary_kind, code):
    binary = tmp_path / "fastagent"
    if binary_kind == "noexec":
        binary.write_text("#!/bin/sh\n")
    async with sup_factory(binary) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "failed")
    rec = await store.get_bot("b1")
    assert rec.last_error_code == code and rec.restart_count == 0 and rec.pid is None
    assert str(binary) in rec.last_error_message


@pytest.mark.parametrize(
    ("profile", "code"),
    [(None, "LLM_PROFILE_REQUIRED"),
     (LlmProfile(name="p", provider="o", model="", api_key="k"), "LLM_PROFILE_INVALID")],
)  # fmt: skip
async def test_profile_errors_mark_failed(tmp_path: Path, sup_factory, store, recorder, profile, code):
    async with sup_factory(make_binary(tmp_path / "bin"), resolve=resolver(profile)) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "failed")
    rec = await store.get_bot("b1")
    assert rec.last_error_code == code and recorder.kinds("b1") == []


def test_bare_root_invocation_is_an_error_exit(tmp_path: Path) -> None:
    """The contract smoke: ``fastagent --output jsonl`` exits non-zero and prints no JSONL."""
    binary = make_binary(tmp_path / "bin")
    out = subprocess.run([str(binary), "--output", "jsonl"], capture_output=True, timeout=20,
                         env={"PATH": os.environ["PATH"]})  # fmt: skip
    assert out.returncode != 0 and out.stdout == b"" and b"bare root" in out.stderr


async def test_stderr_goes_to_the_instance_log(tmp_path: Path, sup_factory, store, recorder) -> None:
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        await sup.request_stop("b1")
        await recorder.wait_for(lambda: recorder.exits("b1") == 1)
    log = await trio.Path(tmp_path / "instances" / "b1" / "logs" / "fastagent.stderr.log").read_text()
    assert "fastagent fixture: starting" in log


@pytest.mark.parametrize("swap", ["symlink", "directory", "not_executable"])
async def test_respawn_refuses_a_swapped_executable(tmp_path: Path, sup_factory, store, recorder, swap: str):
    """The executable is swapped while the bot runs; its crash's respawn is refused, not a crash loop."""
    binary = make_binary(tmp_path / "bin", "restored_happy")
    dump = tmp_path / "swapped-ran.json"
    other = make_binary(tmp_path / "other", "restored_happy", env_dump=str(dump))
    async with sup_factory(binary) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
        pid = sup.live_pid("b1")
        binary.unlink()
        if swap == "symlink":
            binary.symlink_to(other)  # a valid executable behind it: still refused
        elif swap == "directory":
            binary.mkdir()
        else:
            binary.write_text(other.read_text())
        os.kill(pid, signal.SIGKILL)  # a crash: the restart policy respawns at once (tiny backoff)
        await recorder.wait_state("b1", "failed")
    rec = await store.get_bot("b1")
    assert rec.status == "failed" and rec.last_error_code == "FASTAGENT_START_FAILED"
    assert rec.restart_count == 0 and rec.pid is None and str(binary) in rec.last_error_message
    codes = [e.code for e in recorder.events("b1") if type(e).__name__ == "Diagnostic"]
    expected = {"symlink": "fastagent_binary_is_symlink", "directory": "fastagent_binary_not_regular_file",
                "not_executable": "fastagent_binary_not_executable"}[swap]  # fmt: skip
    assert codes == [expected]
    assert recorder.kinds("b1").count("running") == 1  # nothing ran after the swap
    assert not dump.exists()
