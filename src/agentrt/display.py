"""Text an agent wrote, made safe to show a person: every invisible or steering character escaped.

Anything an agent writes that a person reads or approves (a tool's input in
an approval question, a tool label, a recorded summary) goes through
:func:`escape_text` before it reaches a terminal or a page: an escape
sequence cannot move the cursor or erase the question, a carriage return
cannot overwrite it, a bidi override cannot reorder it, a zero-width or
separator character cannot hide or split it.  :func:`wrap_lines` then cuts it
into lines of a width without dropping a character.
"""

from __future__ import annotations

import unicodedata

__all__ = ["SHOW_LIMIT", "escape_text", "wrap_lines"]

#: The longest text (in characters, once escaped) an approval question shows;
#: a tool input longer than this is denied, saying why, rather than shown in part.
SHOW_LIMIT = 8192

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Controls (C0, DEL, C1), format characters (bidi embeddings/overrides/isolates U+202A-202E,
# U+2066-2069, marks U+200E/200F/061C, zero-width U+200B-200D, U+FEFF), line and paragraph
# separators, surrogates, private use and unassigned code points.
_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _units(text: str) -> list[str]:
    """``text`` as display units: a character, or the escape of one."""
    out: list[str] = []
    for ch in text:
        category = unicodedata.category(ch)
        if category in _ESCAPED or (category == "Zs" and ch != " "):
            out.append(_escape(ch))
        else:
            out.append(ch)
    return out


def escape_text(text: str) -> str:
    """``text`` with every control, format (bidi, zero-width), separator and unassigned character escaped.

    ESC is shown as ``\\x1b``, U+202E as ``\\u202e``, newline, carriage return
    and tab as ``\\n``, ``\\r``, ``\\t``; other whitespace than the space
    (U+00A0, U+2007, ...) as ``\\xa0``, ``\\u2007`` and so on.  Everything else,
    the backslash included, is kept as it is.
    """
    if text.isascii() and text.isprintable():
        return text  # the common case, without a look at each character
    return "".join(_units(text))


def _width(unit: str) -> int:
    if len(unit) > 1:
        return len(unit)
    if unicodedata.combining(unit):
        return 0
    return 2 if unicodedata.east_asian_width(unit) in ("W", "F") else 1


def wrap_lines(text: str, width: int) -> list[str]:
    """``escape_text(text)`` cut into lines at most ``width`` columns wide, never dropping a character.

    A line also ends after each escaped newline (``\\n``), so a multi-line
    command reads as lines while its newlines stay visible.  An escape is
    never split; spaces are kept where they fall, including at a cut.
    """
    width = max(width, 12)
    lines: list[str] = []
    parts = text.split("\n")
    for index, part in enumerate(parts):
        units = _units(part) + (["\\n"] if index < len(parts) - 1 else [])
        line: list[str] = []
        used = 0
        for unit in units:
            w = _width(unit)
            if used + w > width and line:
                lines.append("".join(line))
                line, used = [], 0
            line.append(unit)
            used += w
        lines.append("".join(line))
    return lines
