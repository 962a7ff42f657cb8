"""FastAgent stdout JSONL: the line schema, the QR URL validator.

The schema mirrors the original host's validator exactly: ``type`` is one of
the eight lifecycle types, ``timestamp`` an ISO-8601 date-time in UTC written
with ``Z`` (offsets and local times are rejected; any fractional precision;
minute-only ``HH:MMZ`` is accepted because the reference validator accepts
it), ``pid`` a non-negative safe integer as JavaScript counts them (``1.0``
is one, a boolean is not), ``message`` a non-empty
string, ``data`` an object and ``agentId``, when present, a non-empty string.
Unknown keys are ignored.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

__all__ = [
    "EVENT_TYPES",
    "validate_line",
    "is_utc_timestamp",
    "normalize_qr_url",
    "QR_HOST",
]

#: The eight event types a FastAgent process may print, in lifecycle order.
EVENT_TYPES: frozenset[str] = frozenset(
    {
        "process_started",
        "qr_code",
        "login_confirmed",
        "running",
        "account_invalid",
        "runtime_error",
        "stopping",
        "stopped",
    }
)

#: The only host a login QR code may point at.
QR_HOST = "liteapp.weixin.qq.com"

# Calendar-exact date (leap years included) as the reference validator has it,
# then hours:minutes with optional seconds and fraction, then a literal Z.
_DATE = (
    r"(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|02-(?:0[1-9]|1\d|2[0-8])))"
)
_TIME = r"(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?"
_TIMESTAMP = re.compile(rf"{_DATE}T{_TIME}Z", re.ASCII)


def is_utc_timestamp(value: object) -> bool:
    """True when ``value`` is an ISO-8601 UTC date-time ending in ``Z``."""
    return isinstance(value, str) and _TIMESTAMP.fullmatch(value) is not None


_MAX_SAFE_INTEGER = 2**53 - 1


def _safe_int(value: object) -> int | None:
    """An integer as JavaScript sees one: ``1.0`` and ``1e3`` count, booleans and unsafe sizes do not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and abs(value) <= _MAX_SAFE_INTEGER:
        return value
    return None


def validate_line(obj: Any) -> tuple[dict[str, Any] | None, str]:
    """Check one parsed line; return ``(clean, "")`` or ``(None, reason)``.

    ``clean`` holds only the schema's keys (unknown keys are dropped, as the
    reference strips them).  ``reason`` names the first failing field.
    """
    if not isinstance(obj, Mapping):
        return None, "line is not a JSON object"
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        return None, "type is not a known FastAgent event type"
    if not is_utc_timestamp(obj.get("timestamp")):
        return None, "timestamp is not an ISO-8601 UTC date-time"
    pid = _safe_int(obj.get("pid"))
    if pid is None or pid < 0:
        return None, "pid is not a non-negative integer"
    message = obj.get("message")
    if not isinstance(message, str) or not message:
        return None, "message is not a non-empty string"
    data = obj.get("data")
    if not isinstance(data, Mapping):
        return None, "data is not an object"
    clean: dict[str, Any] = {
        "type": kind,
        "timestamp": obj["timestamp"],
        "pid": pid,
        "message": message,
        "data": dict(data),
    }
    if "agentId" in obj:
        agent_id = obj["agentId"]
        if not isinstance(agent_id, str) or not agent_id:
            return None, "agentId is not a non-empty string"
        clean["agentId"] = agent_id
    return clean, ""


def normalize_qr_url(value: object) -> str | None:
    """The normalized login URL when it is trusted, else ``None``.

    Trusted means: scheme ``https``, host exactly ``liteapp.weixin.qq.com``
    (no user info, default port only) and a path under ``/q/``.
    """
    if not isinstance(value, str) or not value or value != value.strip():
        return None
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in value):
        return None
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() != "https":
        return None
    if "@" in parts.netloc or (port is not None and port != 443):
        return None
    if (parts.hostname or "") != QR_HOST:
        return None
    if not parts.path.startswith("/q/"):
        return None
    # A WHATWG parser resolves dot segments ("/q/../x" is "/x"): refuse them
    # rather than guess, plain or percent-encoded.
    segments = urllib.parse.unquote(parts.path).replace("\\", "/").split("/")
    if any(seg in {".", ".."} for seg in segments):
        return None
    # Normalize like a WHATWG serializer would for this narrow shape: lower
    # scheme and host, drop an explicit default port.
    return urllib.parse.urlunsplit(("https", QR_HOST, parts.path, parts.query, parts.fragment))
