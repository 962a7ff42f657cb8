"""Building a :class:`~agentrt.events.TextDelta` cheaply: the one object made per text-delta line.

The public names are :func:`agentrt.dialect.make_text_delta` and
:func:`agentrt.dialect.text_delta_slots`; this module holds how they are built
and checked.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any

import attrs

from .events import Event, TextDelta

__all__ = ["make_text_delta", "text_delta_slots"]


_TextDeltaSlots = tuple[
    Callable[[], TextDelta],
    Callable[[TextDelta, str], None],
    Callable[[TextDelta, int], None],
    Callable[[TextDelta, Any], None],
]


def _normal_text_delta(text: str, index: int, raw: Any) -> TextDelta:
    return TextDelta(text=text, index=index, raw=raw)


def _checked_slots() -> _TextDeltaSlots | None:
    # attrs' frozen ``__init__`` sets each slot through ``object.__setattr__``;
    # filling the slots through their descriptors costs under half as much for
    # the one object built per delta line.  Only when the class is exactly what
    # this relies on (slots ``raw``/``text``/``index``, no validator or
    # converter) and the result equals a normally built event (==, repr, pickle).
    try:
        fields = attrs.fields(TextDelta)
        if [f.name for f in fields] != ["_raw", "text", "index"] or any(
            f.validator is not None or f.converter is not None for f in fields
        ):
            return None
        slots: _TextDeltaSlots = (
            functools.partial(object.__new__, TextDelta),
            TextDelta.__dict__["text"].__set__,
            TextDelta.__dict__["index"].__set__,
            Event.__dict__["_raw"].__set__,
        )
        new, set_text, set_index, set_raw = slots
        probe_raw: dict[str, Any] = {}
        probe = new()
        set_text(probe, "p")
        set_index(probe, 3)
        set_raw(probe, probe_raw)
        normal = _normal_text_delta("p", 3, None)
        if (
            probe == normal
            and probe.raw is probe_raw
            and repr(probe) == repr(normal)
            and pickle.loads(pickle.dumps(probe)) == normal
        ):
            return slots
    except (AttributeError, KeyError, TypeError, pickle.PicklingError):
        pass
    return None


_SLOTS = _checked_slots()


def _text_delta_maker() -> Callable[[str, int, Any], TextDelta]:
    if _SLOTS is None:
        return _normal_text_delta
    new, set_text, set_index, set_raw = _SLOTS

    def fast(text: str, index: int, raw: Any) -> TextDelta:
        ev = new()
        set_text(ev, text)
        set_index(ev, index)
        set_raw(ev, raw)
        return ev

    return fast


def _set_text_field(ev: TextDelta, value: str) -> None:
    object.__setattr__(ev, "text", value)


def _set_index_field(ev: TextDelta, value: int) -> None:
    object.__setattr__(ev, "index", value)


def _set_raw_field(ev: TextDelta, value: Any) -> None:
    object.__setattr__(ev, "_raw", value)


def text_delta_slots() -> _TextDeltaSlots:
    """``(new, set_text, set_index, set_raw)``: a :class:`~agentrt.events.TextDelta` built inline in a hot loop.

    For a dialect's chunk loop (:meth:`HostCodec.decode_lines`), where even
    :func:`make_text_delta`'s one call per line counts::

        new, set_text, set_index, set_raw = text_delta_slots()  # once per chunk
        ...
        event = new()
        set_text(event, text)
        set_index(event, index)
        set_raw(event, line)

    All four must be applied, in any order, before the event leaves the loop;
    the event is then the one ``TextDelta(text=..., index=..., raw=...)``
    builds (``==``, ``repr``, pickling, ``raw``).  The setters are the slots'
    own descriptors (checked against a normally built event when agentrt is
    imported), so an event built this way costs about two fifths of the attrs
    constructor's call.
    """
    if _SLOTS is not None:
        return _SLOTS
    return (functools.partial(object.__new__, TextDelta), _set_text_field, _set_index_field, _set_raw_field)


make_text_delta: Callable[[str, int, Any], TextDelta] = _text_delta_maker()
