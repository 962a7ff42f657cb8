"""A kept JSON fragment written through to an output line as its own bytes, when that is exact.

``agentrt run --json`` encodes every event on one line.  A tool input or a tool
result still held as a :class:`~agentrt.dialect.JsonFragment` (the agent's own
bytes, never read) would have to be parsed only to be encoded again, and such
payloads are most of the bytes of a session.  :func:`fragment_bytes` says
whether the bytes can stand in the line as they are, giving *the same JSON
value* as parsing them with the framing's rules and encoding the result:

* the bytes are valid UTF-8 (a strict decode, 64 KiB at a time) and one
  valid JSON value without lone surrogate escapes (msgspec validates the
  syntax, every escape and every surrogate pair in C without building values);
  a ``msgspec.Raw`` is one msgspec cut out of the line it decoded, having
  validated all of that already (and refusing a lone surrogate escape), as
  :class:`~agentrt.dialect.JsonFragment` requires of every fragment: a string
  held in one is not validated again (UTF-8 is the one check msgspec skips);
* a string passes as it is: those checks are all a string needs;
* an object or array passes only when it is compact (no whitespace between
  tokens, so never a raw ``\\r`` or ``\\n``) and has no duplicate keys, and
  every number in it is an integer of at most 19 digits (18 when negative)
  or a decimal fraction without exponent (so never past 64 bits, never a double that overflows):
  each level is split once by msgspec into its keys and still-raw values, and
  must equal those parts put together again by msgspec (compact, each key in
  its shortest spelling, as orjson writes it), which holds only without
  whitespace and without a dropped duplicate;
* anything else (a scalar at the top, a number with an exponent, whitespace, a
  value with more than :data:`BUDGET` items to visit, a mapping field whose
  fragment is not an object) is not passed: the caller parses and encodes it;
  nor is anything when msgspec is not installed (the core does not require it).

The values are equal; the bytes are those of ``orjson.dumps`` of the parsed
value whenever the agent wrote the value as orjson would (shortest escapes,
shortest numbers), which is how ``JSON.stringify`` writes it.  A string may
also keep an escape orjson would not write (``\\/``, ``\\u00e9``, a surrogate
pair) and a fraction its trailing zeros: the same value, spelled as the agent
spelled it.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

__all__ = ["BUDGET", "fragment_bytes", "fragment_passes"]

BUDGET = 64
"""Items (keys, elements) an object or array fragment may have, all levels counted, to be passed through."""

_validate: Any = None
_split_object: Any = None
_split_array: Any = None
_encode: Any = None
_DecodeError: Any = ValueError
_Raw: Any = None
try:
    import msgspec
except ImportError:  # the core does not require msgspec (the dialects that keep fragments do): never pass
    pass
else:
    _Raw = msgspec.Raw
    _validate = msgspec.json.Decoder(msgspec.Raw).decode
    _split_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
    _split_array = msgspec.json.Decoder(list[msgspec.Raw]).decode
    _encode = msgspec.json.encode
    _DecodeError = msgspec.DecodeError
# A number that orjson reads as JSON.parse and every other reader do: an
# integer within 64 bits (at most 19 digits, 18 when negative: orjson reads
# -9223372036854775809 as a double), a finite fraction.  No exponent: 1e400
# overflows, 1e-400 underflows.
_SAFE_NUMBER = re.compile(rb"(?:-?0|-[1-9][0-9]{0,17}|[1-9][0-9]{0,18})(?:\.[0-9]+)?").fullmatch
_QUOTE, _OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_ARRAY, _CLOSE_ARRAY = b'"{}[]'
_LITERALS = frozenset(b"tfn")  # true, false, null: validated by the split


def fragment_bytes(data: bytes | Any, *, mapping: bool = False) -> bytes | None:
    """``data`` (one JSON value, bytes-like) if it can be written through as it is, else ``None``.

    With ``mapping=True`` only an object passes (the field reads any other
    value as ``{}``).  ``None`` means: parse it and encode the value.
    """
    if not fragment_passes(data, mapping=mapping):
        return None
    return data if type(data) is bytes else bytes(memoryview(data))


def fragment_passes(data: bytes | Any, *, mapping: bool = False) -> bool:
    """Whether :func:`fragment_bytes` would pass ``data``, read in place (never copied).

    For a caller that writes the passed bytes from ``data``'s own buffer
    (``bytes.join`` takes any bytes-like object).
    """
    if _validate is None:
        return False
    view = memoryview(data)
    size = len(view)
    if size < 2:  # no JSON string, object or array is shorter
        return False
    first = view[0]
    last = view[size - 1]
    if first == _QUOTE:
        if mapping or last != _QUOTE:
            return False
        # The one check a string msgspec cut from its line still needs (see the module's docstring).
        if type(data) is _Raw:
            return _utf8(view, size)
    elif first == _OPEN_OBJECT:
        if last != _CLOSE_OBJECT:
            return False
    elif first != _OPEN_ARRAY or mapping or last != _CLOSE_ARRAY:
        return False
    if not _utf8(view, size):
        return False
    try:
        if first == _QUOTE:
            _validate(data)
        elif not _compact_container(data):
            return False
    except (_DecodeError, RecursionError):
        return False
    return True


_utf8_decode = codecs.utf_8_decode
_PIECE = 1 << 16
"""Bytes checked per decode of a large fragment: its text is built a piece at a time, in reused memory."""


def _utf8(view: memoryview, size: int) -> bool:
    """Whether ``view`` is valid UTF-8 (the one check msgspec's raw values skip).

    The only check in C is a decode; a large fragment is decoded a piece at a
    time, so no text four times its size is built (and paged in) at once.
    """
    try:
        if size <= _PIECE:
            _utf8_decode(view, "strict", True)
            return True
        start = 0
        while size - start > _PIECE:
            # Not final: a sequence cut at the piece's end is left for the next piece.
            start += _utf8_decode(view[start : start + _PIECE], "strict", False)[1]
        _utf8_decode(view[start:], "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def _compact_container(data: bytes) -> bool:
    """Whether an object or array (and all it holds) is compact, duplicate-free, with safe numbers.

    Raises msgspec's ``DecodeError`` for invalid JSON.
    """
    pending: list[Any] = [data]
    budget = BUDGET
    while pending:
        item = pending.pop()
        if memoryview(item)[0] == _OPEN_OBJECT:
            parts = _split_object(item)
            values: Any = parts.values()
        else:
            parts = values = _split_array(item)
        # The level put back together by msgspec (no whitespace, each key in its
        # shortest spelling, each value as it is) is the level itself only when it
        # was compact and no duplicate key was dropped: one encode and compare in C
        # instead of adding up the parts' lengths in Python (7.1 -> 6.7 us per
        # tool input of the bench session; most of the rest is msgspec's split).
        if _encode(parts) != (item if type(item) is bytes else bytes(item)):
            return False
        budget -= len(values)
        if budget < 0:
            return False
        for value in values:
            head = memoryview(value)[0]
            if head == _QUOTE or head in _LITERALS:
                continue
            if head in (_OPEN_OBJECT, _OPEN_ARRAY):
                pending.append(value)
            elif _SAFE_NUMBER(bytes(value)) is None:
                return False
    return True
