"""The JSON form of events, built from a per-class field plan instead of generic unstructuring.

:func:`agentrt.events.to_json` used to unstructure every event through cattrs,
which dispatches on every field's type for every event; on ``agentrt run
--json`` that was most of the parent's CPU.  Here each event class gets, once,
the list of its fields with their declared types: fields holding plain values
(``str``, ``int``, ``float``, ``bool``, ``None``) are copied as they are, a
:class:`~agentrt.events.Usage` becomes its dict directly, and only containers
and unusual values still go through cattrs, with the field's declared type, so
the result is exactly what cattrs gives (a test compares them on every event
class and on real captures).

:func:`event_line` goes further for output that is encoded at once: it never
copies containers (orjson reads them in place) and hands only what orjson
cannot encode to cattrs.  A tool input or result still held as an unread
:class:`~agentrt.dialect.JsonFragment` is written as its own bytes when
:func:`agentrt._json.fragment_passthrough.fragment_passes` finds that exact (it says when), else
parsed and encoded; so ``orjson.loads(event_line(e)) == to_json(e)`` always,
and the bytes equal ``orjson.dumps(to_json(e))`` whenever each such fragment
is spelled as orjson spells its value.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from . import events as _events
from ._json.fragment_passthrough import fragment_passes
from ._json.lazy_fields import JsonFragment, stored_getter

__all__ = ["event_dict", "event_line", "event_parts", "lines_parts"]

_PLAIN = frozenset({str, int, float, bool, type(None)})
# Per event class: (field name, declared type) for every field but the private raw.
_PLANS: dict[type, tuple[tuple[str, Any], ...]] = {}
_NAMES: dict[type, tuple[str, ...]] = {}
# Per event class with fields that may hold a JsonFragment: name -> the slot's
# own getter, which returns what is stored without parsing it.
_LAZY: dict[type, dict[str, Any]] = {}
_conv: Any = None


def _converter() -> Any:
    global _conv
    if _conv is None:
        import cattrs

        _conv = cattrs.Converter(omit_if_default=False)
    return _conv


def converter() -> Any:
    """The cattrs converter of the JSON form (also used to rebuild events)."""
    return _converter()


def _plan(cls: type) -> tuple[tuple[str, Any], ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        # cattrs resolves string annotations the same way before unstructuring.
        attrs.resolve_types(cls)
        plan = tuple((f.name, f.type) for f in attrs.fields(cls) if f.name != "_raw")
        _PLANS[cls] = plan
        _NAMES[cls] = tuple(name for name, _ in plan)
        lazy = {name: get for name, _ in plan if (get := stored_getter(cls, name)) is not None}
        if lazy:
            _LAZY[cls] = lazy
    return plan


def _usage(value: Any) -> dict[str, Any]:
    return {
        "input_tokens": value.input_tokens,
        "output_tokens": value.output_tokens,
        "cache_read_input_tokens": value.cache_read_input_tokens,
        "cache_creation_input_tokens": value.cache_creation_input_tokens,
    }


def event_dict(event: Any) -> dict[str, Any]:
    """The JSON form of ``event`` without ``raw``: ``type`` first, then the fields in order."""
    usage = _events.Usage
    data: dict[str, Any] = {"type": event.type}
    for name, declared in _PLANS.get(type(event)) or _plan(type(event)):
        value = getattr(event, name)
        kind = type(value)
        if kind in _PLAIN:
            data[name] = value
        elif kind is usage:
            data[name] = _usage(value)
        else:
            data[name] = _converter().unstructure(value, unstructure_as=declared)
    return data


def _default(value: Any) -> Any:
    # orjson calls this only for what it cannot encode itself (an attrs value,
    # a non-dict mapping, ...): cattrs gives what to_json would have given.
    if type(value) is _events.Usage:
        return _usage(value)
    return _converter().unstructure(value)


_NEWLINE = orjson.OPT_APPEND_NEWLINE


def event_line(event: Any) -> bytes:
    """``orjson.dumps(to_json(event))`` plus a newline, without copying the event's containers."""
    parts = event_parts(event)
    return parts if isinstance(parts, bytes) else b"".join(parts)


# Per event class with lazy fields: its line's head and, per field, the bytes
# that open it (',"name":'), its name and its slot's own getter (or None).
_SPLICED: dict[type, tuple[bytes, tuple[tuple[bytes, str, Any], ...]]] = {}


def _spliced_plan(cls: Any) -> tuple[bytes, tuple[tuple[bytes, str, Any], ...]]:
    lazy = _LAZY[cls]
    fields = tuple((b',"' + name.encode() + b'":', name, lazy.get(name)) for name in _NAMES[cls])
    plan = _SPLICED[cls] = (b'{"type":' + orjson.dumps(cls.type), fields)
    return plan


def event_parts(event: Any) -> bytes | list[Any]:
    """:func:`event_line` as bytes, or as bytes-like parts that join into it.

    The parts are the line around each fragment written through, and the
    fragment's own buffer: a caller that joins many lines at once copies a
    tool's payload once, not three times.
    """
    cls = type(event)
    names = _NAMES.get(cls)
    if names is None:
        _plan(cls)
        names = _NAMES[cls]
    lazy = _LAZY.get(cls)
    if lazy is None:
        data: dict[str, Any] = {"type": event.type}
        for name in names:
            data[name] = getattr(event, name)
        return orjson.dumps(data, default=_default, option=_NEWLINE)
    # A class that may hold a fragment (a tool's input or result): its line is
    # put together field by field, each value encoded as orjson encodes it in
    # the dict (the same bytes: tests hold them equal), a passed fragment as a
    # part of its own.  Measured on the 100k-line session: 2.5 us less per tool
    # event than encoding a dict with a marker and splitting the line at it.
    head, fields = _SPLICED.get(cls) or _spliced_plan(cls)
    dumps = orjson.dumps
    out: list[Any] = [head]
    parts: list[Any] | None = None
    for key, name, get in fields:
        value = getattr(event, name) if get is None else get(event, cls)
        if type(value) is JsonFragment:
            fragment = value.data
            if fragment and fragment_passes(fragment, mapping=value.mapping):
                out.append(key)
                if parts is None:
                    parts = []
                parts.append(b"".join(out))
                parts.append(fragment)
                out = []
                continue
            value = getattr(event, name)  # not passed: reading the field parses it (and keeps the value)
        out.append(key)
        out.append(dumps(value, default=_default))
    out.append(b"}\n")
    if parts is None:
        return b"".join(out)
    parts.append(b"".join(out))
    return parts


_DELTA = b'{"type":"text_delta","text":%s,"index":%d}\n'


def lines_parts(events: Any) -> list[Any]:
    """:func:`event_line` of each of ``events``, in order, as bytes-like parts that join into those lines.

    What ``agentrt run --json`` writes per batch.  A text delta (most events)
    is its JSON form formatted around its encoded text, a tenth of the cost of
    encoding a dict per delta (the same bytes: tests hold them equal); any
    other event is :func:`event_parts`, a passed tool payload as its own
    buffer, so the one join of the batch is the payload's only copy.
    """
    from .events import TextDelta

    dumps, delta = orjson.dumps, _DELTA
    parts: list[Any] = []
    append, extend = parts.append, parts.extend
    for ev in events:
        if type(ev) is TextDelta and type(ev.index) is int:
            append(delta % (dumps(ev.text), ev.index))
        else:
            line = event_parts(ev)
            if type(line) is bytes:
                append(line)
            else:
                extend(line)
    return parts
