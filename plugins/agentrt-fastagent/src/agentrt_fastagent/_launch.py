"""How one FastAgent bot process is launched: binary, argv, env, directories.

Everything here follows the FastAgent CLI contract: the command for the
``disabled`` and ``remote`` sandbox modes, stdin closed, per-instance data,
workspace and log directories with the workspace as cwd, and an environment
built from nothing: the injected profile values plus an exact-name allowlist
of system and proxy variables taken from the parent (non-empty values only).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import attrs

from agentrt.errors import AgentrtError
from agentrt.lowlevel import ProcessSpec

__all__ = [
    "LlmProfile",
    "SandboxConfig",
    "InstancePaths",
    "SAFE_INHERITED_ENV",
    "BOT_ID_PATTERN",
    "check_bot_id",
    "default_binary_candidates",
    "resolve_binary",
    "check_binary",
    "build_argv",
    "build_env",
    "instance_paths",
    "prepare_instance",
    "build_process_spec",
]

#: Parent variables a FastAgent child may inherit (exact names, non-empty values only).
SAFE_INHERITED_ENV: tuple[str, ...] = (
    "ALL_PROXY", "HOME", "HTTPS_PROXY", "HTTP_PROXY", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME",
    "NODE_EXTRA_CA_CERTS", "NO_PROXY", "PATH", "SSL_CERT_DIR", "SSL_CERT_FILE", "TEMP", "TERM",
    "TMP", "TMPDIR", "TZ", "USER", "all_proxy", "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip

#: A bot id names a directory, so it is one safe path segment.
BOT_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_bot_id(bot_id: str) -> str:
    """Return ``bot_id`` or raise ``invalid_bot_id``."""
    if not isinstance(bot_id, str) or not BOT_ID_PATTERN.fullmatch(bot_id) or ".." in bot_id:
        raise AgentrtError(
            "invalid_bot_id",
            f"bot id {bot_id!r} must be 1-64 of letters, digits, '_', '.', '-' (starting alphanumeric)",
        )
    return bot_id


@attrs.frozen(kw_only=True)
class LlmProfile:
    """An LLM profile bound to a bot; the key never appears in a repr."""

    name: str
    provider: str
    model: str
    api_key: str = attrs.field(repr=False)
    base_url: str | None = None
    api_type: str | None = None

    def check(self) -> None:
        """Raise ``llm_profile_invalid`` when key, model or provider is blank."""
        blank = [n for n in ("api_key", "model", "provider") if not str(getattr(self, n) or "").strip()]
        if blank:
            raise AgentrtError("llm_profile_invalid", f"LLM profile {self.name!r} has blank {', '.join(blank)}")


@attrs.frozen(kw_only=True)
class SandboxConfig:
    """The sandbox mode of one bot (``remote`` needs a URL; its key is secret)."""

    mode: Literal["disabled", "remote"] = "disabled"
    url: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)

    def check(self) -> None:
        """Raise ``sandbox_config_invalid`` for an unknown mode or a remote without URL."""
        if self.mode not in ("disabled", "remote"):
            raise AgentrtError("sandbox_config_invalid", f"unknown sandbox mode {self.mode!r}")
        if self.mode == "remote" and not (self.url or "").strip():
            raise AgentrtError("sandbox_config_invalid", "remote sandbox mode needs a sandbox URL")


@attrs.frozen(kw_only=True)
class InstancePaths:
    """The per-instance directories (``root/<bot id>/{data,workspace,logs}``)."""

    root: Path
    data: Path
    workspace: Path
    logs: Path


def instance_paths(instances_dir: Path, bot_id: str) -> InstancePaths:
    """Where bot ``bot_id`` keeps its files under ``instances_dir``."""
    root = Path(instances_dir) / check_bot_id(bot_id)
    return InstancePaths(root=root, data=root / "data", workspace=root / "workspace", logs=root / "logs")


def default_binary_candidates(env: Mapping[str, str]) -> list[Path]:
    """The fallback locations, in order, used when ``FASTAGENT_BINARY_PATH`` is unset.

    1. ``fastagent`` in the bin directory of the Python environment agentrt runs in;
    2. ``$XDG_DATA_HOME/agentrt/fastagent/bin/fastagent`` (``~/.local/share`` by default).
    """
    venv_bin = Path(sys.prefix) / "bin" / "fastagent"
    xdg = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "share")
    return [venv_bin, Path(xdg) / "agentrt" / "fastagent" / "bin" / "fastagent"]


def resolve_binary(env: Mapping[str, str]) -> Path:
    """The FastAgent executable to run (not yet checked; see :func:`check_binary`)."""
    explicit = env.get("FASTAGENT_BINARY_PATH")
    if explicit:
        return Path(explicit)
    candidates = default_binary_candidates(env)
    for cand in candidates:
        if cand.exists():
            return cand
    raise AgentrtError(
        "fastagent_start_failed",
        "Unable to locate the FastAgent CLI binary: set FASTAGENT_BINARY_PATH or install it at "
        + " or ".join(str(c) for c in candidates),
    )


def check_binary(path: Path) -> Path:
    """Check the launch contract of the FastAgent executable (blocking); return ``path``.

    It must be absolute, exist, not be a symbolic link (``lstat``), be a regular
    file and be executable by us.  The supervisor checks before every spawn, so
    an executable swapped for a link or a directory between two starts is
    refused, not run.  Codes: ``fastagent_binary_not_absolute``,
    ``fastagent_binary_not_found``, ``fastagent_binary_is_symlink``,
    ``fastagent_binary_not_regular_file``, ``fastagent_binary_not_executable``.
    """
    if not path.is_absolute():
        raise AgentrtError("fastagent_binary_not_absolute", f"FastAgent binary path is not absolute: {path}")
    try:
        st = os.lstat(path)
    except OSError:
        raise AgentrtError("fastagent_binary_not_found", f"FastAgent binary not found: {path}") from None
    if stat.S_ISLNK(st.st_mode):
        raise AgentrtError("fastagent_binary_is_symlink", f"FastAgent binary is a symbolic link: {path}")
    if not stat.S_ISREG(st.st_mode):
        raise AgentrtError("fastagent_binary_not_regular_file", f"FastAgent binary is not a regular file: {path}")
    if not os.access(path, os.X_OK):
        raise AgentrtError("fastagent_binary_not_executable", f"FastAgent binary is not executable: {path}")
    return path


def build_argv(binary: Path, sandbox: SandboxConfig) -> tuple[str, ...]:
    """The contract's command for the bot's sandbox mode."""
    sandbox.check()
    argv: list[str] = [str(binary), "--channel", "weixin"]
    if sandbox.mode == "remote":
        assert sandbox.url is not None
        argv += ["--sandbox", "remote", "--sandbox-url", sandbox.url]
    argv += ["--output", "jsonl"]
    return tuple(argv)


def build_env(
    *,
    bot_id: str,
    profile: LlmProfile | None,
    sandbox: SandboxConfig,
    paths: InstancePaths,
    parent_env: Mapping[str, str],
) -> dict[str, str]:
    """The complete child environment: allowlisted parent values plus injected ones."""
    if profile is None:
        raise AgentrtError("llm_profile_required", f"bot {bot_id!r} has no LLM profile bound")
    profile.check()
    sandbox.check()
    env = {name: parent_env[name] for name in SAFE_INHERITED_ENV if parent_env.get(name)}
    env.update(
        {
            "FASTAGENT_API_KEY": profile.api_key,
            "FASTAGENT_PROVIDER": profile.provider,
            "FASTAGENT_MODEL": profile.model,
            "IM_GATEWAY_AGENT_ID": bot_id,
            "IM_GATEWAY_ALLOW_ALL_PERMISSIONS": "true",
            "IM_GATEWAY_DATA_DIR": str(paths.data),
            "IM_GATEWAY_WORKSPACE_DIR": str(paths.workspace),
        }
    )
    if profile.base_url:
        env["FASTAGENT_BASE_URL"] = profile.base_url
    if profile.api_type:
        env["FASTAGENT_API_TYPE"] = profile.api_type
    if sandbox.mode == "remote":
        assert sandbox.url is not None
        env["SANDBOX_URL"] = sandbox.url
        if sandbox.api_key:
            env["SANDBOX_API_KEY"] = sandbox.api_key
    return env


def prepare_instance(paths: InstancePaths, binary: Path) -> None:
    """Create the instance directories and check the binary (blocking: run in a thread)."""
    for d in (paths.data, paths.workspace, paths.logs):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_binary(binary)


def build_process_spec(
    *,
    bot_id: str,
    binary: Path,
    profile: LlmProfile | None,
    sandbox: SandboxConfig,
    paths: InstancePaths,
    parent_env: Mapping[str, str],
    term_grace: float = 3.0,
) -> ProcessSpec:
    """The :class:`~agentrt._process.ProcessSpec` of one bot start (pure)."""
    env = build_env(bot_id=bot_id, profile=profile, sandbox=sandbox, paths=paths, parent_env=parent_env)
    return ProcessSpec(
        argv=build_argv(binary, sandbox),
        env=env,
        cwd=str(paths.workspace),
        stdin=False,
        shutdown_line=None,
        # No stdin to close: go straight to SIGTERM on stop.
        shutdown_grace=0.0,
        term_grace=term_grace,
    )
