"""``fs/read_text_file`` and ``fs/write_text_file`` for an agent, confined to the session's directory.

Paths must be absolute (the protocol says so) and resolve, symlinks followed,
inside the root; ``..`` and symlinks that lead out are refused, and the
resolved path is opened again from the root one component at a time with
``O_NOFOLLOW`` (a directory swapped for a symlink after the check cannot lead
out).  Only a
regular file is read or written: the file is opened with ``O_NONBLOCK |
O_NOFOLLOW | O_CLOEXEC`` (so a FIFO, a socket or a device an agent planted in
its directory can never block the open), checked with ``fstat`` and served
from that one descriptor (so it cannot be swapped for something else between
the check and the use).  Reads and writes over ``limit`` bytes are refused.
Errors are JSON-RPC errors with a stable ``data.code``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from typing import Any

import trio

from ._rpc import dumps

__all__ = ["FsError", "answer", "read_text_file", "serves", "write_text_file"]

_OPEN_FLAGS = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class FsError(Exception):
    """A refused or failed file request: JSON-RPC ``rpc_code`` and a stable ``code``."""

    def __init__(self, rpc_code: int, code: str, message: str) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code
        self.code = code
        self.message = message


def _confined(root: str, params: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The real root and the path's components under it (symlinks resolved, checked to stay inside)."""
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
    if real == real_root:
        raise _not_regular("a directory")
    return real_root, os.path.relpath(real, real_root).split(os.sep)


def _open_beneath(real_root: str, parts: list[str], flags: int) -> int:
    """Open ``parts`` under ``real_root`` one component at a time, following no symlink.

    The resolved path was checked to stay inside; walking it again from the
    root with ``O_NOFOLLOW`` means a directory swapped for a symlink after the
    check (the agent runs beside us) cannot lead the open outside.
    """
    walk = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    dfd = os.open(real_root, walk)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, walk, dir_fd=dfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    changed = "a directory of the path changed while it was opened"
                    raise FsError(-32602, "path_outside_cwd", changed) from None
                raise
            os.close(dfd)
            dfd = child
        return os.open(parts[-1], flags, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(what: str) -> FsError:
    return FsError(-32602, "not_regular_file", f"path is {what}; only regular files are read or written")


def _open_regular(where: tuple[str, list[str]], flags: int, verb: str) -> int:
    """A descriptor on the confined path that ``fstat`` says is a regular file (never blocks: ``O_NONBLOCK``)."""
    try:
        fd = _open_beneath(*where, flags | _OPEN_FLAGS)
    except FileNotFoundError:
        raise FsError(-32002, "resource_not_found", "no such file") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened to write; or a socket
            raise _not_regular("a FIFO or socket") from None
        if exc.errno == errno.EISDIR:
            raise _not_regular("a directory") from None
        if exc.errno == errno.ELOOP:  # a symlink put at the final component after the check
            raise FsError(-32602, "invalid_path", "path is a symbolic link") from None
        raise FsError(-32603, "file_error", f"cannot {verb} the file ({type(exc).__name__})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(_kind(mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text_file(root: str, params: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """The ``fs/read_text_file`` result (``line`` 1-based and ``limit`` lines honoured).

    The file's bytes as UTF-8 (invalid bytes replaced); a file over ``limit``
    bytes, at the open or while it is read, is refused.
    """
    fd = _open_regular(_confined(root, params), os.O_RDONLY, "read")
    try:
        if os.fstat(fd).st_size > limit:
            raise FsError(-32602, "file_too_large", f"file is larger than {limit} bytes")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, limit + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise FsError(-32603, "file_error", f"cannot read the file ({type(exc).__name__})") from None
    finally:
        os.close(fd)
    if got > limit:  # it grew after the fstat
        raise FsError(-32602, "file_too_large", f"file is larger than {limit} bytes")
    text = b"".join(chunks).decode("utf-8", errors="replace")
    line, count = params.get("line"), params.get("limit")
    if isinstance(line, int) or isinstance(count, int):
        lines = text.splitlines(keepends=True)
        start = max(0, line - 1) if isinstance(line, int) else 0
        end = start + count if isinstance(count, int) and count >= 0 else None
        text = "".join(lines[start:end])
    return {"content": text}


def write_text_file(root: str, params: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """Write ``content`` to ``path`` (the parent directory must exist inside the root).

    A new file is created; an existing one must be a regular file, and is
    truncated only after ``fstat`` said so (a FIFO is never written to).
    """
    where = _confined(root, params)
    content = params.get("content")
    if not isinstance(content, str):
        raise FsError(-32602, "invalid_params", "content must be a string")
    data = content.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise FsError(-32602, "file_too_large", f"content is larger than {limit} bytes")
    fd = _open_regular(where, os.O_WRONLY | os.O_CREAT, "write")
    try:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise FsError(-32603, "file_error", f"cannot write the file ({type(exc).__name__})") from None
    finally:
        os.close(fd)
    return {}


def serves(method: str, options: Any) -> bool:
    """True when ``method`` is a file request the host's options (``fs_read``, ``fs_write``) enable."""
    return (method == "fs/read_text_file" and options.fs_read) or (
        method == "fs/write_text_file" and options.fs_write
    )


async def answer(method: str, rid: Any, params: Mapping[str, Any], cwd: str, options: Any) -> bytes:
    """The JSON-RPC response line to the file request ``rid`` (``method`` enabled: :func:`serves`)."""
    op = read_text_file if method == "fs/read_text_file" else write_text_file
    try:
        # The open never blocks (O_NONBLOCK, regular files only); abandoning the thread
        # on cancel keeps the request bounded by the turn's cancel, timeout and signals too.
        result = await trio.to_thread.run_sync(op, cwd, params, options.max_file_bytes, abandon_on_cancel=True)
    except FsError as exc:
        error = {"code": exc.rpc_code, "message": exc.message, "data": {"code": exc.code}}
        return dumps({"jsonrpc": "2.0", "id": rid, "error": error})
    return dumps({"jsonrpc": "2.0", "id": rid, "result": result})
