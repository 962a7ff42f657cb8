"""The read_note tool: read a text note from one directory, and nothing outside it.

The model writes the arguments, so they are checked as untrusted input: a
relative name of plain parts (no ``..``, no control characters), resolved
inside the directory after following symbolic links, naming a regular file
(a FIFO or a device is never opened), read up to a size cap.  Every refusal is
a :class:`~agentrt.errors.ToolError` with a stable code, and its detail never
repeats what the model sent.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from agentrt.errors import ToolError
from agentrt.tools import ToolContext

__all__ = ["ReadNoteTool", "notes_dir_from_env", "PARAMETERS"]

MAX_NAME = 255
MAX_CHARS = 65536
MAX_FILE_BYTES = 4 * 1024 * 1024
PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": MAX_NAME,
                 "description": "The note's path relative to the notes directory, e.g. todo.txt"},
        "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_CHARS, "default": 4096},
    },
}


def notes_dir_from_env(env: Mapping[str, str]) -> Path:
    """``EXAMPLE_NOTES_DIR``: an existing absolute directory (``read_note_dir_invalid`` otherwise)."""
    raw = env.get("EXAMPLE_NOTES_DIR", "")
    if "\x00" in raw or not os.path.isabs(raw) or not os.path.isdir(raw):
        raise ToolError("read_note_dir_invalid", "EXAMPLE_NOTES_DIR must be an existing absolute directory")
    return Path(os.path.realpath(raw))


def _name(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME:
        raise ToolError("read_note_name_invalid", f"name must be a relative path of 1 to {MAX_NAME} characters")
    parts = value.split("/")
    if (
        value.startswith(("/", "~"))
        or any(part in ("", ".", "..") for part in parts)
        or any(ord(c) < 32 or c in "\\\x7f" or 0xD800 <= ord(c) <= 0xDFFF for c in value)
    ):
        raise ToolError("read_note_name_invalid", "name must be plain parts joined by / (no .., no control characters)")
    return value


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHARS:
        raise ToolError("read_note_max_chars_invalid", f"max_chars must be an integer from 1 to {MAX_CHARS}")
    return value


class ReadNoteTool:
    """Reads notes under ``root`` (an :class:`agentrt.tools.Tool`)."""

    name = "read_note"
    description = "Read a text note by its name in the notes directory; returns its text (cut to max_chars)."
    parameters = PARAMETERS

    def __init__(self, root: Path) -> None:
        self.root = root

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """``{"name", "text", "truncated"}`` for the note; ``ToolError`` for bad arguments or a missing note."""
        if not isinstance(arguments, Mapping) or not set(arguments) <= {"name", "max_chars"}:
            raise ToolError("read_note_arguments_invalid", "pass name and optionally max_chars, nothing else")
        name = _name(arguments.get("name"))
        limit = _limit(arguments.get("max_chars", 4096))
        text = await trio.to_thread.run_sync(self._read, name)
        return {"name": name, "text": text[:limit], "truncated": len(text) > limit}

    def _read(self, name: str) -> str:
        path = os.path.realpath(self.root / name)  # symbolic links followed, then confined
        if os.path.commonpath([path, self.root]) != str(self.root):
            raise ToolError("read_note_outside_dir", "the note is outside the notes directory")
        try:
            info = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError("read_note_not_found", "no note with that name") from None
        except OSError:
            raise ToolError("read_note_unreadable", "the note cannot be read") from None
        if not stat.S_ISREG(info.st_mode):
            raise ToolError("read_note_not_found", "no note with that name (not a regular file)")
        if info.st_size > MAX_FILE_BYTES:
            raise ToolError("read_note_too_large", f"the note is larger than {MAX_FILE_BYTES} bytes")
        try:
            with open(path, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError:
            raise ToolError("read_note_unreadable", "the note cannot be read") from None
        return data[:MAX_FILE_BYTES].decode("utf-8", "replace")
