"""JavaScript ``JSON.stringify`` parity for the idempotency key (§B).

The reference agent derives the managed-task idempotency key from
``JSON.stringify({argv, timeout_seconds})``; a Python agent must produce the
same bytes or a resumed turn would submit a second task.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence

__all__ = ["js_number", "js_string", "js_length", "js_slice", "task_digest_input", "idempotency_key"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
KEY_PREFIX = "awp-reference-agent:"


def js_number(value: int | float) -> str:
    """Serialise a finite number as ``JSON.stringify`` does (``60`` not ``60.0``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("not a number")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "null"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    # Python's repr is the shortest round-trip form, as ECMAScript's Number::toString
    # is; they agree on the exponent-free range the tool accepts (1..300).
    return repr(value)


def js_string(value: str) -> str:
    """Serialise a string as ``JSON.stringify`` does (no ASCII escaping; lone surrogates as ``\\uXXXX``)."""
    out = json.dumps(value, ensure_ascii=False)
    # json.loads can hand us lone surrogates; JS escapes them (well-formed stringify) where a raw one
    # could not even be encoded as UTF-8.
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)


def js_length(value: str) -> int:
    """The JavaScript ``.length`` of ``value``: UTF-16 code units."""
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def js_slice(value: str, limit: int) -> str:
    """``value.slice(0, limit)`` in UTF-16 units, never leaving half a surrogate pair."""
    if len(value) <= limit // 2 or js_length(value) <= limit:
        return value
    units = 0
    for index, char in enumerate(value):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return value[:index]
    return value


def task_digest_input(argv: Sequence[str], timeout_seconds: int | float) -> str:
    """``JSON.stringify({argv, timeout_seconds})``: compact, keys in that order."""
    return (
        '{"argv":[' + ",".join(js_string(a) for a in argv) + '],"timeout_seconds":' + js_number(timeout_seconds) + "}"
    )


def idempotency_key(
    session_id: str, turn_identity: str, tool_call_id: str, argv: Sequence[str], timeout_seconds: int | float
) -> str:
    """The §B key: ``awp-reference-agent:`` + sha256 over the call identity and its arguments."""
    digest = hashlib.sha256()
    digest.update(f"{session_id}\0{turn_identity}\0{tool_call_id}\0".encode("utf-8", "surrogatepass"))
    digest.update(task_digest_input(argv, timeout_seconds).encode("utf-8"))
    return KEY_PREFIX + digest.hexdigest()
