"""Event fields that hold a JSON fragment of the source line until first read.

A tool's input and a tool's result are most of the bytes of the lines that
carry them (a file read, an edit's old and new text) and most consumers never
look at them: building their strings is most of decoding such a line.  A
dialect's typed path may therefore hand :class:`~agentrt.events.ToolUse`
``input`` or :class:`~agentrt.events.ToolResult` ``content`` a
:class:`JsonFragment` (the value's bytes, e.g. a ``msgspec.Raw``): the field
parses it on first read, with the framing's rules, and keeps the result.

The field is a data descriptor wrapping the attrs slot, so *every* reader
(attribute access, ``==``, ``repr``, ``attrs.evolve``/``asdict``, cattrs, the
JSON form, pickling) goes through it and sees the parsed value: an event with
a fragment is indistinguishable from one built with the parsed value.
"""

from __future__ import annotations

from typing import Any

from .._jsonline import parse_fragment

__all__ = ["JsonFragment", "lazy_field", "stored_getter"]


class JsonFragment:
    """One JSON value kept as its source bytes, parsed on first read of the event field holding it.

    ``data`` is anything bytes-like (``bytes``, ``memoryview``, ``msgspec.Raw``)
    holding exactly one JSON value as the agent wrote it; empty means the key
    was absent (the field then reads ``None``).  With ``mapping=True`` a value
    that is not a JSON object reads as ``{}`` (what the dialects make of a tool
    input of another type).  The bytes must have been validated as JSON (msgspec
    does while decoding the line): a fragment is parsed as the framing parses a
    whole line, so a value orjson refuses (a >64-bit integer, invalid UTF-8)
    reads as the plain parse of the line would give it.
    """

    __slots__ = ("data", "mapping")

    def __init__(self, data: Any, *, mapping: bool = False) -> None:
        self.data = data
        self.mapping = mapping

    def value(self) -> Any:
        """The parsed value (a new object on every call: the field keeps the first)."""
        value = parse_fragment(self.data) if self.data else None
        if self.mapping and type(value) is not dict:
            return {}
        return value

    def __repr__(self) -> str:
        return f"JsonFragment({len(self.data)} bytes)"


class _LazySlot:
    """The descriptor of a field that may hold a :class:`JsonFragment` (wraps the attrs slot)."""

    __slots__ = ("_delete", "_get", "_set")

    def __init__(self, slot: Any) -> None:
        self._get = slot.__get__
        self._set = slot.__set__
        self._delete = slot.__delete__

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        value = self._get(instance, owner)
        if type(value) is JsonFragment:
            value = value.value()
            # Frozen for users; replacing the fragment by its value changes nothing they see.
            self._set(instance, value)
        return value

    def __set__(self, instance: Any, value: Any) -> None:
        self._set(instance, value)

    def __delete__(self, instance: Any) -> None:
        self._delete(instance)


def lazy_field(cls: type, name: str) -> None:
    """Let the slotted attrs field ``name`` of ``cls`` hold a :class:`JsonFragment`."""
    slot = cls.__dict__[name]
    if not isinstance(slot, _LazySlot):
        setattr(cls, name, _LazySlot(slot))


def stored_getter(cls: type, name: str) -> Any:
    """The getter of the slot under :func:`lazy_field` ``name`` (a fragment stays unparsed), else ``None``."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            slot = klass.__dict__[name]
            return slot._get if isinstance(slot, _LazySlot) else None
    return None
