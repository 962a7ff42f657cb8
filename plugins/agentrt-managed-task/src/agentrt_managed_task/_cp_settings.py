"""The control plane's settings: its tunables from the environment, and its API key."""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from agentrt import AgentrtError

__all__ = ["ControlPlaneSettings", "load_api_key", "KEY_VAR", "KEY_FILE_VAR"]

#: Placeholders seen in examples; a key this guessable protects nothing.
_WEAK_KEYS = frozenset(
    {
        "changeme-changeme",
        "change-me-change-me",
        "development-api-key",
        "dev-api-key-change-me",
        "0123456789abcdef",
        "1234567890123456",
        "abcdefghijklmnop",
        "secretsecretsecret",
        "passwordpassword",
    }
)

KEY_VAR = "AGENTRT_CONTROL_PLANE_API_KEY"
KEY_FILE_VAR = "AGENTRT_CONTROL_PLANE_API_KEY_FILE"


@attrs.frozen(kw_only=True)
class ControlPlaneSettings:
    """Tunables of one control plane (defaults as §C)."""

    api_key: str | None = attrs.field(default=None, repr=False)
    lease_seconds: float = 60.0
    max_retries: int = 3
    agent_stale_seconds: float = 90.0
    maintenance_interval: float = 5.0
    retention_seconds: float = 0.0
    """Finished tasks older than this are forgotten by the maintenance loop; 0 keeps them forever."""

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, api_key: str | None) -> ControlPlaneSettings:
        """Read ``AWP_TASK_LEASE_SECONDS``, ``AWP_TASK_MAX_RETRIES`` and friends."""

        def number(name: str, default: float, low: float, high: float) -> float:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            if not math.isfinite(value) or not low <= value <= high:
                raise AgentrtError("invalid_control_plane_setting", f"{name} must be a number in {low}..{high}")
            return value

        return cls(
            api_key=api_key,
            lease_seconds=number("AWP_TASK_LEASE_SECONDS", 60.0, 0.1, 86400),
            max_retries=int(number("AWP_TASK_MAX_RETRIES", 3, 0, 100)),
            agent_stale_seconds=number("AWP_AGENT_STALE_SECONDS", 90.0, 1, 86400),
            maintenance_interval=number("AWP_MAINTENANCE_INTERVAL_SECONDS", 5.0, 0.05, 3600),
            retention_seconds=number("AGENTRT_TASK_RETENTION_SECONDS", 0.0, 0, 10 * 365 * 86400),
        )


def load_api_key(env: Mapping[str, str], key_file: str | None = None) -> str | None:
    """The bearer key from ``--api-key-file``, ``AGENTRT_CONTROL_PLANE_API_KEY(_FILE)``, or ``None``.

    A configured key shorter than 16 bytes (or with spaces/controls) is refused at startup.
    """
    path = key_file or env.get(KEY_FILE_VAR)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:  # startup, before the event loop serves
                key = handle.read().strip()
        except OSError as exc:
            raise AgentrtError("control_plane_api_key_unreadable", f"cannot read the key file {path!r}") from exc
    else:
        key = env.get(KEY_VAR, "").strip()
    if not key:
        return None
    if len(key.encode()) < 16 or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in key):
        raise AgentrtError("weak_control_plane_api_key", "the control-plane key must be at least 16 visible bytes")
    if len(set(key)) < 6 or key.lower() in _WEAK_KEYS:
        raise AgentrtError(
            "weak_control_plane_api_key", "the control-plane key is a placeholder: generate a random one"
        )
    return key
