"""The framing's parse of one line or one JSON value, and its encoding of one record.

What :mod:`agentrt._framing` does with each complete line, kept apart so that a
kept line (``Event.raw``) or a kept value (a :class:`~agentrt.dialect.JsonFragment`)
parses later exactly as the reader would have parsed it: orjson first; what orjson
refuses takes the lenient path (invalid UTF-8 and lone surrogates become U+FFFD,
integers past 64 bits doubles, JavaScript's whitespace stripped), as the original
host's ``JSON.parse`` of a non-fatally decoded line does.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

import orjson

__all__ = ["MALFORMED", "SKIP", "encode_line", "lenient", "parse_fragment", "parse_line"]

# What JavaScript's String.prototype.trim() removes (WhiteSpace + LineTerminator),
# used on the slow path so that stripping matches the original host exactly.
_JS_WHITESPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_loads = orjson.loads
#: What :func:`lenient` gives for a blank line (None cannot say it: a line may be ``null``).
SKIP: Any = object()
_JSONDecodeError = orjson.JSONDecodeError
#: What :func:`lenient` gives for a line that is not JSON.
MALFORMED: Any = object()


def lenient(line: bytes) -> Any:
    """The framing's parse of a line orjson refused: SKIP, MALFORMED or the object."""
    text = line.decode("utf-8", "replace").strip(_JS_WHITESPACE)
    if not text:
        return SKIP
    try:
        return _loads(text)
    except _JSONDecodeError:
        pass
    try:
        # JSON.parse accepts a few things orjson refuses (numbers that overflow
        # to Infinity, lone surrogate escapes): keep such lines, as the host did.
        obj = json.loads(text, parse_constant=_reject_constant, parse_int=_js_int)
        # orjson (and msgspec, for a typed loader) refuse every lone surrogate, so
        # this slow path is the only way one can enter: repairing here costs the
        # hot path nothing.  The text was decoded from bytes, so a surrogate in
        # the object can only come from an escape, and only then is it walked.
        if _SURROGATE_ESCAPE.search(text) is not None:
            obj = _replace_surrogates(obj)
        return obj
    except (ValueError, RecursionError):
        return MALFORMED


def _js_int(digits: str) -> int | float:
    """An integer as JSON.parse reads it: past 64 bits a double, so every sink can encode it again."""
    value = int(digits)
    return value if -(2**63) <= value < 2**64 else float(value)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(obj: Any) -> Any:
    """``obj`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if type(obj) is str:
        return _SURROGATE.sub("\ufffd", obj)
    if type(obj) is list:
        return [_replace_surrogates(item) for item in obj]
    if type(obj) is dict:
        return {_SURROGATE.sub("\ufffd", key): _replace_surrogates(value) for key, value in obj.items()}
    return obj


def parse_line(line: bytes) -> Any:
    """One line parsed as :class:`JsonlReader` parses it; ``None`` for a blank or malformed line.

    This is what :attr:`agentrt.events.Event.raw` uses to materialise an
    event's source object from its kept line on demand.
    """
    try:
        return _loads(line)
    except _JSONDecodeError:
        pass
    obj = lenient(line)
    return None if obj is SKIP or obj is MALFORMED else obj


def parse_fragment(data: Any) -> Any:
    """One JSON value (bytes-like, already validated as JSON) parsed as the framing parses a line holding it.

    A value is parsed by itself exactly as inside its line: orjson first; what
    orjson refuses takes the lenient path (invalid UTF-8 and lone surrogates
    become U+FFFD, integers past 64 bits doubles).  Both paths read the
    bytes between two ASCII delimiters the same way alone as in the line,
    so the value equals the one of the whole line's parse.
    """
    view = memoryview(data)
    try:
        return _loads(view)
    except _JSONDecodeError:
        pass
    obj = lenient(bytes(view))
    return None if obj is SKIP or obj is MALFORMED else obj


def _reject_constant(name: str) -> NoReturn:
    # NaN / Infinity / -Infinity literals are not JSON (JSON.parse rejects them).
    raise ValueError(name)


def encode_line(obj: Any) -> bytes:
    """One JSON Lines record: compact JSON (raw UTF-8) followed by ``\\n``."""
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
