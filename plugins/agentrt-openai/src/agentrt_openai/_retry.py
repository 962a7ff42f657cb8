"""When and how long to wait before retrying a request that failed before its body began."""

from __future__ import annotations

import datetime
import email.utils
import time
from collections.abc import Mapping

__all__ = ["RETRYABLE_STATUSES", "retry_after_seconds"]

#: Statuses worth another try: timeout, conflict, rate limit and server errors.
RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date).

    ``None`` when neither is present or parseable; never negative.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms.strip())
        except ValueError:
            ms = -1.0
        if ms >= 0 and ms == ms and ms != float("inf"):
            return ms / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isascii() and raw.isdigit():
        return float(int(raw))
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are always UTC
        when = when.replace(tzinfo=datetime.UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
