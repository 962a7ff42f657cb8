"""Transcripts: what an agent wrote and what agentrt wrote to it, unparsed, one file per conversation.

The file (``<database dir>/transcripts/<conversation id>.atr``, 0600 in a 0700
directory) is a header line, a JSON line, then records.  The header::

    AGENTRT-TRANSCRIPT 1\\n
    {"agentrt": "<version>", "conversation": "<id>", "dialect": "<name or null>", "wall": <unix time>}\\n

Each record is a 9-byte head (``struct`` ``<cII``: the kind, the payload's
length, the milliseconds since ``wall``: the time index) and the payload:

* ``O``: a chunk the agent wrote to its stdout, as read, before decoding;
* ``I``: bytes agentrt wrote to the agent's stdin, after the write;
* ``P``: a process starts (JSON: ``process``, ``pid``, ``dialect``, and
  ``replay``: ``decode`` when its bulk events are decoded again from its
  ``O`` records, ``events`` when every event is an ``E`` record); a replay
  starts a fresh decoder there;
* ``E``: an event agentrt made itself or that the decoder cannot give again
  (JSON: ``seq``, the event's JSON form, and ``eat`` when it stands for a
  decoded event the turn rules replaced);
* ``C``: the process is done with.

Each record is one ``os.writev`` on an ``O_APPEND`` descriptor: the page cache
has it when the call returns, so a SIGKILL of agentrt loses nothing already
written, and at most the record being written (a torn last record, which a
reader ignores).  Nothing is fsynced: a power loss can drop what the kernel
had not written back yet.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import time
from collections.abc import Callable, Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any, BinaryIO

import orjson

__all__ = [
    "MAGIC", "HEAD", "OpenFiles", "Record", "Transcript", "TranscriptTap", "agentrt_version", "read_header",
    "read_records", "transcript_dir", "transcript_name",
]

MAGIC = b"AGENTRT-TRANSCRIPT 1\n"
HEAD = struct.Struct("<cII")
_SAFE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_MAX_MS = (1 << 32) - 1

#: One record: ``(kind, time in ms since the header's wall, offset of its head, payload)``.
Record = tuple[bytes, int, int, bytes]


def agentrt_version() -> str:
    """agentrt's installed version ("unknown" when its metadata is missing)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentrt")
    except PackageNotFoundError:
        return "unknown"


def transcript_dir(database: Path) -> Path:
    """Where the transcripts of the database at ``database`` live."""
    return database.parent / "transcripts"


def transcript_name(conversation_id: str) -> str:
    """The file name of a conversation's transcript (an id that is not a safe name is hashed)."""
    if _SAFE_ID.fullmatch(conversation_id) and not conversation_id.startswith("."):
        return conversation_id + ".atr"
    return "h-" + sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:40] + ".atr"


class Transcript:
    """One conversation's transcript file, appended to from the trio thread.

    Never raises from :meth:`append`: the first ``OSError`` is handed to
    ``on_error`` (the sink turns it into one ``recorder_failed``) and every
    later append is a no-op.  The descriptor is opened on the first append
    and may be closed and reopened (:meth:`release`).
    """

    def __init__(
        self, path: Path, conversation_id: str, dialect: str | None, on_error: Callable[[Path, OSError], None]
    ) -> None:
        self.path = path
        self.conversation_id = conversation_id
        self.dialect = dialect
        self._on_error = on_error
        self._fd = -1
        self._wall = time.time()
        self._mono = time.monotonic()
        self.failed = False
        #: The file's size as far as this writer knows (the offset of the next record).
        self.size = 0
        #: Agent processes seen (``P`` records written).
        self.processes = 0
        #: A replay decodes the bulk events of this conversation from its ``O`` records
        #: (its dialect decodes output alone); else every event is an ``E`` record.
        self.decoded = False
        #: Taps open on it now.
        self.taps = 0

    def _open(self) -> bool:
        if self.failed:
            return False
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self._fail(exc)
            return False
        try:
            # Held while open, dropped by the kernel when this process dies: a later open of the
            # database closes a turn left running only once its writer is gone (see _unfinished).
            fcntl.flock(fd, fcntl.LOCK_SH)
            size = os.fstat(fd).st_size
            if size == 0:
                meta = {"agentrt": agentrt_version(), "conversation": self.conversation_id,
                        "dialect": self.dialect, "wall": self._wall}
                header = MAGIC + orjson.dumps(meta) + b"\n"
                _write_all(fd, [header])
                size = len(header)
            else:
                # Reopened (another writer, or after release): its times count from its own header.
                found = read_header(self.path)
                self._wall = float(found.get("wall", self._wall))
                self._mono = time.monotonic() - (time.time() - self._wall)
        except (OSError, ValueError) as exc:
            os.close(fd)
            self._fail(exc if isinstance(exc, OSError) else OSError(errno.EINVAL, "not a transcript"))
            return False
        self._fd = fd
        self.size = size
        return True

    def _fail(self, exc: OSError) -> None:
        self.failed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._on_error(self.path, exc)

    def append(self, kind: bytes, payload: bytes) -> int:
        """Append one record (one ``writev``); its offset, or -1 when the transcript failed."""
        if self._fd < 0 and not self._open():
            return -1
        ms = int((time.monotonic() - self._mono) * 1000)
        head = HEAD.pack(kind, len(payload), ms if 0 <= ms <= _MAX_MS else (_MAX_MS if ms > 0 else 0))
        at = self.size
        try:
            _write_all(self._fd, [head, payload])
        except OSError as exc:
            self._fail(exc)
            return -1
        self.size = at + len(head) + len(payload)
        return at

    def release(self) -> None:
        """Close the descriptor (a later append reopens it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, parts: list[bytes]) -> None:
    # One writev; a short write (a full disk, a signal) writes the rest, and a
    # disk that takes nothing raises ENOSPC.
    total = sum(len(p) for p in parts)
    done = os.writev(fd, parts)
    if done == total:
        return
    rest = b"".join(parts)[done:]
    while rest:
        n = os.write(fd, rest)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        rest = rest[n:]


class TranscriptTap:
    """The :class:`agentrt.lowlevel.RawTap` of one agent process: its bytes, in order, into a transcript."""

    def __init__(self, transcript: Transcript, on_close: Callable[[Transcript], None] | None = None) -> None:
        self._transcript = transcript
        self._append = transcript.append
        self._on_close = on_close
        self._closed = False

    def agent_output(self, chunk: bytes) -> None:
        """One chunk read from the agent's stdout (one record)."""
        if not self._closed:
            self._append(b"O", chunk)

    def agent_input(self, data: bytes) -> None:
        """Bytes written to the agent's stdin (one record)."""
        if not self._closed:
            self._append(b"I", data)

    def close(self) -> None:
        """The process is done with (a ``C`` record; idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._append(b"C", b"")
        if self._on_close is not None:
            self._on_close(self._transcript)


def read_header(path: Path) -> dict[str, Any]:
    """The transcript's header fields; ``ValueError`` when the file is not a transcript."""
    with open(path, "rb") as f:
        magic = f.read(len(MAGIC))
        if magic != MAGIC:
            raise ValueError("not an agentrt transcript")
        line = f.readline(1 << 16)
    meta = orjson.loads(line)
    if not isinstance(meta, dict):
        raise ValueError("not an agentrt transcript")
    return meta


class OpenFiles:
    """The files a set of paused readers holds open, so that they can be closed between reads.

    A reader given one (:func:`read_records`) adds its file when it opens it;
    :meth:`close` closes them all, and each reader, when next asked for a
    record, opens its file again and seeks to where it stopped.  So a replay
    kept for later (a page of a thread's events) holds no descriptor while it
    waits.  Owned by one thread at a time (the store's lock).
    """

    def __init__(self) -> None:
        self._files: set[BinaryIO] = set()

    def add(self, f: BinaryIO) -> None:
        """Track ``f`` (opened by a reader)."""
        self._files.add(f)

    def discard(self, f: BinaryIO) -> None:
        """Stop tracking ``f`` (its reader closed it)."""
        self._files.discard(f)

    def close(self) -> None:
        """Close every tracked file (their readers reopen them when resumed)."""
        files, self._files = self._files, set()
        for f in files:
            f.close()


def read_records(
    path: Path, start: int = 0, end: int | None = None, kinds: bytes | None = None, files: OpenFiles | None = None,
) -> Iterator[Record]:
    """The records whose head lies in ``[start, end)`` (``start`` 0: the first), in order.

    ``kinds`` keeps only those kinds (their payloads are read; the others are
    skipped with a seek).  A torn last record (the writer was killed in the
    middle of it) ends the iteration.  The records read are those the file
    held when the iteration began.  With ``files``, the file may be closed
    between two records (:meth:`OpenFiles.close`): the next one reopens it at
    the offset where reading stopped, and ends the iteration when the file is
    gone or is another one.
    """
    # Not a with block: the file may be replaced by a reopened one; the finally closes whichever is current.
    f: BinaryIO = open(path, "rb")  # noqa: SIM115
    try:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError("not an agentrt transcript")
        f.readline(1 << 16)
        first = f.tell()
        st = os.fstat(f.fileno())
        size, identity = st.st_size, (st.st_dev, st.st_ino)
        stop = size if end is None else min(end, size)
        at = max(start, first)
        f.seek(at)
        if files is not None:
            files.add(f)
        while at + HEAD.size <= stop:
            if f.closed:  # closed while paused: on again from the offset reached
                try:
                    f = open(path, "rb")  # noqa: SIM115
                except OSError:
                    return
                st = os.fstat(f.fileno())
                if (st.st_dev, st.st_ino) != identity:
                    return
                if files is not None:
                    files.add(f)
                f.seek(at)
            head = f.read(HEAD.size)
            if len(head) < HEAD.size:
                return
            kind, length, ms = HEAD.unpack(head)
            if at + HEAD.size + length > size:
                return  # torn
            if kinds is None or kind in kinds:
                payload = f.read(length)
                if len(payload) < length:
                    return
                yield kind, ms, at, payload
            else:
                f.seek(length, os.SEEK_CUR)
            at += HEAD.size + length
    finally:
        if files is not None:
            files.discard(f)
        f.close()
