"""A fast JSON form of events for the ``events`` table.

It produces exactly :func:`agentrt.events.to_json` (without ``raw``), but skips
cattrs: the sink encodes tens of thousands of events per second.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from agentrt.events import Event, Usage

__all__ = ["encode_event"]

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in attrs.fields(cls) if f.name not in ("raw", "_raw")) if attrs.has(cls) else ()
        _FIELDS[cls] = names
    return names


def _default(value: Any) -> Any:
    if isinstance(value, Usage):
        return attrs.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if attrs.has(type(value)):
        return {name: getattr(value, name) for name in _fields(type(value))}
    # Whatever else a third-party event carries is kept as its text, never dropped.
    return repr(value)


def encode_event(event: Event) -> bytes:
    """The event's JSON form as UTF-8 bytes (``type`` first, ``raw`` left out)."""
    data: dict[str, Any] = {"type": event.type}
    for name in _fields(type(event)):
        data[name] = getattr(event, name)
    try:
        return orjson.dumps(data, default=_default, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        # orjson refuses lone surrogates (and integers over 64 bits); the
        # stdlib's ASCII JSON keeps them exactly as \udXXXX escapes.
        return json.dumps(data, default=_default, ensure_ascii=True).encode()
