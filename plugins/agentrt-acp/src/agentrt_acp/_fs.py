"""``fs/read_text_file`` and ``fs/write_text_file`` for an agent, confined to the session's directory.

Paths must be absolute (the protocol says so) and resolve, symlinks followed,
inside the root; ``..`` and symlinks that lead out are refused, as are files
over the size bound.  Errors are JSON-RPC errors with a stable ``data.code``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["FsError", "read_text_file", "write_text_file"]


class FsError(Exception):
    """A refused or failed file request: JSON-RPC ``rpc_code`` and a stable ``code``."""

    def __init__(self, rpc_code: int, code: str, message: str) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code
        self.code = code
        self.message = message


def _confined(root: str, params: Mapping[str, Any]) -> str:
    path = params.get("path")
    if not isinstance(path, str) or not path or "\x00" in path:
        raise FsError(-32602, "invalid_path", "path must be a non-empty string")
    if not os.path.isabs(path):
        raise FsError(-32602, "invalid_path", "path must be absolute")
    if ".." in path.split(os.sep):
        raise FsError(-32602, "path_outside_cwd", "path must not contain '..'")
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise FsError(-32602, "path_outside_cwd", "path is outside the session's working directory")
    return real


def read_text_file(root: str, params: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """The ``fs/read_text_file`` result (``line`` 1-based and ``limit`` lines honoured)."""
    path = _confined(root, params)
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise FsError(-32602, "file_too_large", f"file is larger than {limit} bytes")
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(limit + 1)
    except FileNotFoundError:
        raise FsError(-32002, "resource_not_found", "no such file") from None
    except IsADirectoryError:
        raise FsError(-32602, "invalid_path", "path is a directory") from None
    except OSError as exc:
        raise FsError(-32603, "file_error", f"cannot read the file ({type(exc).__name__})") from None
    line, count = params.get("line"), params.get("limit")
    if isinstance(line, int) or isinstance(count, int):
        lines = text.splitlines(keepends=True)
        start = max(0, line - 1) if isinstance(line, int) else 0
        end = start + count if isinstance(count, int) and count >= 0 else None
        text = "".join(lines[start:end])
    return {"content": text}


def write_text_file(root: str, params: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """Write ``content`` to ``path`` (the parent directory must exist inside the root)."""
    path = _confined(root, params)
    content = params.get("content")
    if not isinstance(content, str):
        raise FsError(-32602, "invalid_params", "content must be a string")
    data = content.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise FsError(-32602, "file_too_large", f"content is larger than {limit} bytes")
    try:
        # O_NOFOLLOW: a symlink planted after the check cannot redirect the write.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise FsError(-32603, "file_error", f"cannot write the file ({type(exc).__name__})") from None
    return {}
