"""Where a table, a key or a syntax error is in a TOML file's text, for ``<file>:<line>`` messages.

``tomllib`` gives no positions for the values it returns, so the config
checks find the line of ``[table]`` / ``key =`` by scanning the text; the
line of a syntax error comes from the position ``tomllib`` writes into its
message.  Lines are 1-based; a key or table the scan cannot place (written
in a form it does not know) is reported at its table's header, else line 1.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence

__all__ = ["header_line", "key_line", "syntax_error"]

_LOCATION_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def syntax_error(exc: tomllib.TOMLDecodeError, lines: Sequence[str]) -> tuple[int, str]:
    """The line of ``tomllib``'s error and what it says (first letter lower-cased, position removed).

    An error without a position is at the end of the file: its last line.
    """
    message = str(exc)
    match = _LOCATION_RE.search(message)
    line = int(match.group(1)) if match else max(1, len(lines))
    what = message[: match.start()] if match else message.replace("(at end of document)", "").strip()
    if not match:
        what += " at the end of the file"
    return line, f"{what[:1].lower()}{what[1:]}"


def header_line(lines: Sequence[str], dotted: str, name: str | None = None) -> int:
    """The line of ``[dotted]``; for an agent also ``[agents."name"]`` or an inline ``name =``."""
    parts = [re.escape(p) for p in dotted.split(".")]
    if name is not None:
        parts[-1] = rf"(?:{re.escape(name)}|\"{re.escape(name)}\"|'{re.escape(name)}')"
    header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(parts) + r"\s*\]")
    for number, line in enumerate(lines, 1):
        if header.match(line):
            return number
    if name is not None:  # agents.NAME = {...} or [agents] NAME = {...}
        inline = re.compile(rf"^\s*(?:agents\s*\.\s*)?[\"']?{re.escape(name)}[\"']?\s*=")
        for number, line in enumerate(lines, 1):
            if inline.match(line):
                return number
    return 1


def key_line(lines: Sequence[str], header: int | None, key: str) -> int:
    """The line of ``key = ...`` inside the table starting at line ``header`` (top level: ``None``)."""
    start = 0 if header is None else header
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number in range(start, len(lines)):
        line = lines[number]
        if number > start and line.lstrip().startswith("[") and header is not None:
            break
        if header is None and line.lstrip().startswith("["):
            break
        if pattern.match(line):
            return number + 1
    return header or 1
