"""The provider's configuration and the rules that validate it (contract §B).

:func:`from_env` reads ``AGENTRT_API_BASE_URL``, ``AGENTRT_API_TOKEN``,
``AGENTRT_TIMEOUT_MS`` and ``AGENTRT_REMOTE_API_OPT_IN`` and applies the
reference agent's rules, raising :class:`~agentrt.AgentrtError` with their
stable codes.  The reference agent calls it at start-up so that a bad
setting fails before the first input line, not at the first model request.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import SplitResult, urlsplit

import attrs

from agentrt.errors import AgentrtError
from agentrt.net import is_loopback_host

__all__ = [
    "OpenAIConfig",
    "from_env",
    "validate_base_url",
    "validate_token",
    "endpoint_url",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT_MS",
]

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
DEFAULT_TIMEOUT_MS = 120_000
_MIN_TIMEOUT_MS = 1_000
_MAX_TIMEOUT_MS = 600_000
_MAX_TOKEN_BYTES = 4096


def _default_user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"agentrt/{version('agentrt')}"
    except PackageNotFoundError:  # running from a source tree without metadata
        return "agentrt/0"


@attrs.frozen(kw_only=True)
class OpenAIConfig:
    """Everything the provider needs; build it with :func:`from_env` to get §B's checks.

    ``base_url`` is the validated API base (``.../v1``); requests go to
    :attr:`endpoint`.  ``timeout_s`` bounds each whole request, retries
    included.  Retries happen only before the first body byte: at most
    ``max_retries`` of them, each wait capped at ``retry_wait_max_s``;
    ``retry_backoff_s`` is the first backoff when the server gives no
    ``Retry-After``.
    """

    base_url: str
    token: str | None = attrs.field(default=None, repr=False)  # never printed
    timeout_s: float = attrs.field(default=DEFAULT_TIMEOUT_MS / 1000, validator=attrs.validators.gt(0))
    user_agent: str = attrs.field(factory=_default_user_agent)
    max_retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    retry_wait_max_s: float = attrs.field(default=20.0, validator=attrs.validators.ge(0))
    retry_backoff_s: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))

    @property
    def endpoint(self) -> str:
        """The chat-completions URL derived from :attr:`base_url`."""
        return endpoint_url(self.base_url)


def validate_base_url(raw: str, *, remote_opt_in: bool = False) -> str:
    """Check an API base URL against §B; return it unchanged, or raise with the rule's code."""
    try:
        parts: SplitResult = urlsplit(raw.strip())
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        raise AgentrtError("invalid_api_base_url", "the API base URL cannot be parsed") from None
    if not parts.scheme or not host or any(c.isspace() for c in raw.strip()):
        raise AgentrtError("invalid_api_base_url", "the API base URL needs a scheme and a host")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        # The value is not echoed: it may carry the credentials it should not.
        raise AgentrtError(
            "api_base_url_must_not_contain_credentials_query_or_fragment",
            "put the token in AGENTRT_API_TOKEN, not in the URL",
        )
    scheme = parts.scheme.lower()
    if is_loopback_host(host):
        if scheme not in ("http", "https"):
            raise AgentrtError("invalid_local_api_protocol", "a loopback API must use http or https")
    else:
        if scheme != "https":
            raise AgentrtError("remote_api_requires_https", f"the API host {host!r} is not loopback")
        if not remote_opt_in:
            raise AgentrtError(
                "remote_api_requires_explicit_opt_in",
                f"the API host {host!r} is remote: set AGENTRT_REMOTE_API_OPT_IN=1 to allow it",
            )
    return raw.strip()


def endpoint_url(base_url: str) -> str:
    """``base_url`` with its path's trailing ``/`` removed and ``/chat/completions`` added (once)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    return parts._replace(path=path).geturl()


def validate_token(raw: str | None) -> str | None:
    """Check an API token against §B; ``None`` or empty means no token."""
    if not raw:
        return None
    if (
        raw != raw.strip()
        or len(raw.encode("utf-8", "surrogatepass")) > _MAX_TOKEN_BYTES
        or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in raw)
    ):
        # Never say what was wrong with the value beyond the rule: it is a secret.
        raise AgentrtError(
            "invalid_api_token",
            "the API token must be at most 4096 bytes without whitespace or control characters",
        )
    return raw


# What JavaScript's String.prototype.trim() removes (the reference agent trims the timeout so).
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _timeout_ms(raw: str | None) -> int:
    raw = (raw or "").strip(_JS_WHITESPACE)
    if not raw:
        return DEFAULT_TIMEOUT_MS
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not (_MIN_TIMEOUT_MS <= int(raw) <= _MAX_TIMEOUT_MS):
        raise AgentrtError(
            "invalid_agentrt_timeout_ms",
            f"AGENTRT_TIMEOUT_MS must be an integer from {_MIN_TIMEOUT_MS} to {_MAX_TIMEOUT_MS}",
        )
    return int(raw)


def from_env(env: Mapping[str, str]) -> OpenAIConfig:
    """Build the configuration from the agent's environment, applying §B's rules in §B's order.

    Order: base URL, then token, then timeout; the first failure is raised.
    """
    base_url = validate_base_url(
        env.get("AGENTRT_API_BASE_URL") or DEFAULT_BASE_URL,
        remote_opt_in=env.get("AGENTRT_REMOTE_API_OPT_IN") == "1",
    )
    token = validate_token(env.get("AGENTRT_API_TOKEN"))
    timeout_ms = _timeout_ms(env.get("AGENTRT_TIMEOUT_MS"))
    return OpenAIConfig(base_url=base_url, token=token, timeout_s=timeout_ms / 1000)
