"""Validation of the control-plane URL and API key, shared by the tool and the worker (§B)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import attrs

from agentrt import AgentrtError
from agentrt.net import is_loopback_host

__all__ = ["ClientConfig", "validate_control_plane_url", "validate_token", "tls_verify"]

OPT_IN = "AWP_AGENT_MANAGED_TASKS_OPT_IN"
URL_VAR = "AWP_CONTROL_PLANE_URL"
KEY_VAR = "AWP_CONTROL_PLANE_API_KEY"
REMOTE_OPT_IN = "AGENTRT_REMOTE_API_OPT_IN"
POLL_VAR = "AGENTRT_MANAGED_TASK_POLL_MS"  # default 500; tests shorten it
CA_VAR = "AGENTRT_CONTROL_PLANE_CA_FILE"


def validate_control_plane_url(raw: str, *, remote_opt_in: bool) -> str:
    """Return the origin (``scheme://host[:port]``) or raise with a §B code."""
    value = raw.strip()
    try:
        parts = urlsplit(value)
        port = parts.port  # raises ValueError on a bad port
        host = parts.hostname
    except ValueError as exc:
        raise AgentrtError("invalid_control_plane_url", "the control-plane URL cannot be parsed") from exc
    if not parts.scheme or not host or not parts.netloc:
        raise AgentrtError("invalid_control_plane_url", "the control-plane URL needs a scheme and a host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise AgentrtError("invalid_control_plane_url", "the control-plane URL must not carry credentials")
    if parts.query or parts.fragment or value.endswith(("?", "#")) or parts.path not in ("", "/"):
        raise AgentrtError("invalid_control_plane_url", "the control-plane URL must be an origin only")
    scheme = parts.scheme.lower()
    if is_loopback_host(host):
        if scheme not in ("http", "https"):
            raise AgentrtError("invalid_control_plane_protocol", "a loopback control plane must use http or https")
    else:
        if scheme != "https":
            raise AgentrtError("remote_control_plane_requires_https", "a remote control plane must use https")
        if not remote_opt_in:
            raise AgentrtError(
                "remote_control_plane_requires_explicit_opt_in",
                f"a remote control plane also needs {REMOTE_OPT_IN}=1",
            )
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return f"{scheme}://{netloc}"


def validate_token(raw: str) -> str:
    """Return the trimmed API key or raise ``invalid_control_plane_token`` (the value is never echoed)."""
    token = raw.strip()
    size = len(token.encode("utf-8", "surrogatepass"))
    if not 16 <= size <= 4096 or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in token):
        raise AgentrtError(
            "invalid_control_plane_token",
            "the control-plane key must be 16..4096 bytes of visible characters",
        )
    return token


@attrs.frozen(kw_only=True)
class ClientConfig:
    """A validated control-plane address and key."""

    base_url: str
    api_key: str = attrs.field(repr=False)
    poll_interval: float = 0.5
    request_timeout: float = 5.0
    #: A CA bundle for an https control plane with a private CA (default: the system's trust store).
    ca_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClientConfig | None:
        """The tool's configuration, ``None`` when managed tasks are not configured at all."""
        opt_in = env.get(OPT_IN, "")
        url = env.get(URL_VAR, "")
        key = env.get(KEY_VAR, "")
        if not opt_in and not url and not key:
            return None
        if opt_in != "1":
            if url or key:
                raise AgentrtError(
                    "managed_tasks_require_explicit_opt_in",
                    f"{URL_VAR}/{KEY_VAR} are set but {OPT_IN} is not exactly 1",
                )
            return None  # an opt-in other than "1" on its own: simply not enabled
        if not url or not key:
            missing = " and ".join(n for n, v in ((URL_VAR, url), (KEY_VAR, key)) if not v)
            raise AgentrtError("managed_tasks_configuration_incomplete", f"{missing} not set")
        base = validate_control_plane_url(url, remote_opt_in=env.get(REMOTE_OPT_IN) == "1")
        poll = env.get(POLL_VAR, "")
        if poll and (not poll.isdigit() or not 10 <= int(poll) <= 5000):
            raise AgentrtError("invalid_managed_task_poll_interval", f"{POLL_VAR} must be 10..5000")
        ca_file = env.get(CA_VAR) or None
        if ca_file is not None and not os.path.isabs(ca_file):
            raise AgentrtError("invalid_control_plane_ca_file", f"{CA_VAR} must be an absolute path")
        tls_verify(ca_file)  # fail at startup, not on the first tool call
        return cls(
            base_url=base,
            api_key=validate_token(key),
            poll_interval=int(poll) / 1000 if poll else 0.5,
            ca_file=ca_file,
        )


def tls_verify(ca_file: str | None) -> ssl.SSLContext | bool:
    """httpx's ``verify``: the system trust store, or a context trusting ``ca_file``."""
    if ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise AgentrtError("invalid_control_plane_ca_file", f"cannot load the CA bundle {ca_file!r}") from exc
