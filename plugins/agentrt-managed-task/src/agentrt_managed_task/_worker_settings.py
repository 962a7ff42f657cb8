"""The trusted worker's settings (§C): the opt-in, the control plane, the allow-list, the limits."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agentrt import AgentrtError

from ._config import REMOTE_OPT_IN, validate_control_plane_url, validate_token

__all__ = ["WorkerSettings", "resolve_allowlist", "OPT_IN_VAR", "KEY_VAR", "DEFAULT_TRUSTED_PATH", "MAX_OUTPUT_CAP"]

OPT_IN_VAR = "AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN"
KEY_VAR = "AWP_CONTROL_PLANE_API_KEY"
DEFAULT_TRUSTED_PATH = "/usr/local/bin:/usr/bin:/bin"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
MAX_OUTPUT_CAP = 1024 * 1024
#: What every command gets from the worker itself; ``--pass-env`` may not override these.
_FIXED_ENV = frozenset(
    {"HOME", "PATH", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONIOENCODING", "PYTHONUTF8"}
)


def resolve_allowlist(names: Sequence[str], trusted_path: str) -> dict[str, str]:
    """Map each allow-listed basename to its executable on the trusted PATH (at start, once)."""
    if not names:
        raise AgentrtError("worker_allowlist_empty", "give at least one --allow EXECUTABLE")
    dirs = [d for d in trusted_path.split(os.pathsep) if d]
    if not dirs or not all(os.path.isabs(d) for d in dirs):
        raise AgentrtError("invalid_trusted_path", "the trusted PATH must list absolute directories")
    resolved = {}
    for name in names:
        if not _NAME.match(name):
            raise AgentrtError("invalid_allowed_command", f"{name!r} is not a bare executable name")
        found = shutil.which(name, path=os.pathsep.join(dirs))
        if found is None:
            raise AgentrtError("worker_command_not_found", f"{name!r} is not on the trusted PATH")
        resolved[name] = os.path.abspath(found)
    return resolved


@attrs.frozen(kw_only=True)
class WorkerSettings:
    """One worker's configuration."""

    base_url: str
    api_key: str = attrs.field(repr=False)
    allowed: Mapping[str, str]
    trusted_path: str = DEFAULT_TRUSTED_PATH
    work_dir: str
    slots: int = 2
    agent_id: str = attrs.field(factory=lambda: f"{socket.gethostname()[:64]}-{os.getpid()}-{secrets.token_hex(4)}")
    poll_interval: float = 2.0
    timeout_seconds: float = 3600.0
    max_output_bytes: int = MAX_OUTPUT_CAP
    request_timeout: float = 10.0
    retry_attempts: int = 5
    retry_initial: float = 1.0
    retry_max: float = 60.0
    replay_interval: float = 30.0
    allowed_env: Mapping[str, str] = attrs.field(factory=dict)
    ca_file: str | None = None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, control_plane: str, allow: Sequence[str], **options: Any
    ) -> WorkerSettings:
        """Validate the opt-in, URL, key and allow-list; raise :class:`AgentrtError` otherwise."""
        if env.get(OPT_IN_VAR) != "1":
            raise AgentrtError(
                "trusted_task_execution_requires_opt_in",
                f"the worker runs commands unsandboxed: set {OPT_IN_VAR}=1 to accept that",
            )
        base = validate_control_plane_url(control_plane, remote_opt_in=env.get(REMOTE_OPT_IN) == "1")
        key = env.get(KEY_VAR, "")
        if not key:
            raise AgentrtError("control_plane_api_key_missing", f"set {KEY_VAR}")
        trusted = options.pop("trusted_path", None) or DEFAULT_TRUSTED_PATH
        slots = options.get("slots", 2)
        if not 1 <= slots <= 64:
            raise AgentrtError("invalid_worker_slots", "--slots must be 1..64")
        passed = options.pop("pass_env", ())
        for name in passed:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name) or name in _FIXED_ENV:
                raise AgentrtError("invalid_pass_env", f"cannot pass {name!r} to commands")
        options["allowed_env"] = {name: env[name] for name in passed if name in env}
        cap = options.get("max_output_bytes", MAX_OUTPUT_CAP)
        if not 1 <= cap <= MAX_OUTPUT_CAP:
            raise AgentrtError("invalid_worker_output_cap", "the output cap is 1..1048576 bytes")
        return cls(
            base_url=base,
            api_key=validate_token(key),
            allowed=resolve_allowlist(allow, trusted),
            trusted_path=trusted,
            **options,
        )
