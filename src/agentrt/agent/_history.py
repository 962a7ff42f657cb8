"""Native session history of the reference agent: one private JSON file per session.

The file ``<state>/<session_id>.json`` holds
``{"version":1,"session_id":id,"messages":[{"role","content"}...]}`` (compact
JSON): the user messages and the final assistant texts, never tool traffic,
the last :data:`MAX_MESSAGES`, at most :data:`MAX_SESSION_BYTES`.

Everything here is synchronous and does blocking file I/O on purpose: the
agent calls it through ``trio.to_thread.run_sync``.  The rules are the ones
of the original reference agent, plus durability: a save is a temp file in
the same directory (``O_EXCL``, 0600), written, fsynced, renamed over the
target, then the directory is fsynced, so a crash at any instant leaves the
old or the new complete history, never a torn one.

Two processes may resume one session at once (``agentrt agent --resume S``
twice).  Each save is then an append under the session's lock
(:func:`append_session`: ``flock`` on ``<state>/.<session_id>.lock``, waited
for at most :data:`LOCK_TIMEOUT` seconds, else ``session_busy``): the history
is reloaded, this turn's messages appended and the file replaced, so both
turns are kept, in the order they finished.  Never a silent loss.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from ..errors import AgentrtError

__all__ = [
    "MAX_MESSAGES",
    "MAX_SESSION_BYTES",
    "SESSION_ID_RE",
    "LOCK_TIMEOUT",
    "SessionState",
    "append_session",
    "prepare_state_dir",
    "load_session",
    "save_session",
    "validate_session_id",
]

MAX_MESSAGES = 100
MAX_SESSION_BYTES = 4 * 1024 * 1024
SESSION_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_TEMP_RE = re.compile(r"\.(?P<sid>[A-Za-z0-9._:-]{1,256})\.[0-9a-f]{32}\.tmp")
_READ_CHUNK = 64 * 1024
LOCK_TIMEOUT = 30.0
"""The longest wait for another process's save of the same session (a save takes milliseconds)."""


@attrs.define(kw_only=True)
class SessionState:
    """A session id and its history (``{"role", "content"}`` dicts, oldest first)."""

    session_id: str
    messages: list[dict[str, Any]] = attrs.field(factory=list)


def validate_session_id(value: str) -> str:
    """``value`` if it is a valid session id, else ``invalid_session_id``."""
    if not SESSION_ID_RE.fullmatch(value):
        raise AgentrtError("invalid_session_id", "session ids match [A-Za-z0-9._:-]{1,256}")
    return value


def _check_private(st: os.stat_result, mode: int, what: str) -> None:
    # Private means: ours, and nobody else may even read it.
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) != mode:
        raise AgentrtError("unsafe_session_state_permissions", f"{what} must be owned by the user with mode {mode:o}")


def _check_components(path: str) -> None:
    # Every component must be a real directory: a symlink anywhere would let
    # another user redirect where the history is written.
    current = os.sep
    for part in [p for p in path.split(os.sep) if p]:
        current = os.path.join(current, part)
        st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise AgentrtError("unsafe_session_state_directory", "a state directory component is not a plain directory")


def prepare_state_dir(configured: str) -> str:
    """Create (0700) and validate the state directory; return its canonical path.

    Errors: ``invalid_state_directory`` (not absolute, cannot be created),
    ``unsafe_session_state_directory`` (a component is a symlink or not a
    directory), ``unsafe_session_state_permissions`` (not ours or not 0700).
    """
    if not os.path.isabs(configured) or "\0" in configured:
        raise AgentrtError("invalid_state_directory", "the state directory must be an absolute path")
    configured = os.path.normpath(configured)
    try:
        os.makedirs(configured, mode=0o700, exist_ok=True)
        st = os.lstat(configured)
    except OSError as exc:
        raise AgentrtError("invalid_state_directory", f"cannot create the state directory ({exc.strerror})") from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise AgentrtError("unsafe_session_state_directory", "the state directory is not a plain directory")
    canonical = os.path.realpath(configured)
    try:
        _check_components(canonical)
        _check_private(os.lstat(canonical), 0o700, "the state directory")
    except FileNotFoundError as exc:  # raced with a removal
        raise AgentrtError("invalid_state_directory", "the state directory vanished") from exc
    if not os.access(canonical, os.R_OK | os.W_OK | os.X_OK):
        raise AgentrtError("invalid_state_directory", "the state directory is not readable and writable")
    return canonical


def _session_path(state_dir: str, session_id: str) -> str:
    return os.path.join(state_dir, f"{validate_session_id(session_id)}.json")


def _check_file(st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise AgentrtError("unsafe_session_state_target", "the session file is not a regular file")
    _check_private(st, 0o600, "the session file")
    if st.st_size > MAX_SESSION_BYTES:
        raise AgentrtError("session_state_oversize", f"the session file exceeds {MAX_SESSION_BYTES} bytes")


def _read_bounded(path: str) -> bytes:
    before = os.lstat(path)
    _check_file(before)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        opened = os.fstat(fd)
        _check_file(opened)
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise AgentrtError("session_state_identity_changed", "the session file changed while it was opened")
        chunks: list[bytes] = []
        total = 0
        while total <= MAX_SESSION_BYTES:
            chunk = os.read(fd, min(_READ_CHUNK, MAX_SESSION_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > MAX_SESSION_BYTES:
            raise AgentrtError("session_state_oversize", f"the session file exceeds {MAX_SESSION_BYTES} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _validate_messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_MESSAGES:
        raise AgentrtError("invalid_session_messages", "messages must be a list of at most 100 items")
    out: list[dict[str, Any]] = []
    for message in value:
        if not isinstance(message, dict):
            raise AgentrtError("invalid_session_message", "each message must be an object")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise AgentrtError("invalid_session_role", "roles are user or assistant")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise AgentrtError("invalid_session_content", "content is a string or a list")
        # Rebuilt with keys in the canonical order: the turn identity hashes them.
        out.append({"role": role, "content": content})
    return out


def _remove_stale_temps(state_dir: str, session_id: str) -> None:
    # A process killed between creating its temp file and renaming it leaves
    # the temp behind; the next process resuming that session sweeps it, so
    # at most one (an in-flight write) ever exists.
    try:
        names = os.listdir(state_dir)
    except OSError:
        return
    for name in names:
        m = _TEMP_RE.fullmatch(name)
        if m is None or m.group("sid") != session_id:
            continue
        path = os.path.join(state_dir, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                os.unlink(path)


def load_session(state_dir: str, session_id: str | None) -> SessionState:
    """The history of ``session_id`` (``None``: a new session with a uuid4 id).

    A missing file is an empty history under that id.  Errors: see the
    module's codes (``invalid_session_state`` for bad JSON, version or id;
    ``session_busy`` when another process holds the session's lock too long).
    """
    if not session_id:
        return SessionState(session_id=str(uuid.uuid4()))
    # Under the lock: the stale-temp sweep must never take another process's write in flight.
    with _session_lock(state_dir, session_id):
        return _load_locked(state_dir, session_id)


def _load_locked(state_dir: str, session_id: str) -> SessionState:
    path = _session_path(state_dir, session_id)
    _remove_stale_temps(state_dir, session_id)
    try:
        data = _read_bounded(path)
    except FileNotFoundError:
        return SessionState(session_id=session_id)
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AgentrtError("invalid_session_state", "the session file is not valid JSON") from exc
    if not isinstance(parsed, dict) or parsed.get("version") != 1 or parsed.get("session_id") != session_id:
        raise AgentrtError("invalid_session_state", "the session file has the wrong version or session id")
    if isinstance(parsed.get("version"), bool):  # True == 1 in Python, not in JSON
        raise AgentrtError("invalid_session_state", "the session file has the wrong version")
    return SessionState(session_id=session_id, messages=_validate_messages(parsed.get("messages")))


def encode_session(session_id: str, messages: Sequence[dict[str, Any]]) -> bytes:
    """The file content for a history (compact JSON, last :data:`MAX_MESSAGES` messages)."""
    body = {"version": 1, "session_id": session_id, "messages": list(messages[-MAX_MESSAGES:])}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def save_session(state_dir: str, state: SessionState) -> None:
    """Atomically replace the session file with ``state`` (durable once this returns).

    Errors: ``session_state_oversize`` (nothing written), the directory and
    target checks of :func:`prepare_state_dir`, ``session_state_write_failed``,
    ``session_busy``.  To add a turn, :func:`append_session` keeps what another
    process saved meanwhile; this replaces it.
    """
    payload = encode_session(state.session_id, state.messages)
    if len(payload) > MAX_SESSION_BYTES:
        raise AgentrtError("session_state_oversize", f"the history exceeds {MAX_SESSION_BYTES} bytes")
    state_dir = prepare_state_dir(state_dir)
    with _session_lock(state_dir, state.session_id):
        _save_locked(state_dir, state.session_id, payload)


def append_session(state_dir: str, session_id: str, messages: Sequence[dict[str, Any]]) -> SessionState:
    """Append ``messages`` to the stored history of ``session_id``; return the history now stored.

    Under the session's lock the file is reloaded first, so a turn that another
    process saved since this one loaded the session is kept (before these
    messages).  Errors: those of :func:`load_session` and :func:`save_session`.
    """
    state_dir = prepare_state_dir(state_dir)
    with _session_lock(state_dir, session_id):
        current = _load_locked(state_dir, session_id)
        updated = SessionState(session_id=session_id, messages=[*current.messages, *messages][-MAX_MESSAGES:])
        payload = encode_session(session_id, updated.messages)
        if len(payload) > MAX_SESSION_BYTES:
            raise AgentrtError("session_state_oversize", f"the history exceeds {MAX_SESSION_BYTES} bytes")
        _save_locked(state_dir, session_id, payload)
    return updated


@contextlib.contextmanager
def _session_lock(state_dir: str, session_id: str) -> Iterator[None]:
    # flock on a file of its own: the session file is replaced by rename, so a lock
    # on it would be on the old inode.  The lock dies with its holder (even SIGKILL).
    path = os.path.join(state_dir, f".{validate_session_id(session_id)}.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink planted where the lock goes
            raise AgentrtError("unsafe_session_state_target", "the session lock is a symlink") from exc
        raise AgentrtError("session_state_write_failed", f"cannot open the session lock ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise AgentrtError("unsafe_session_state_target", "the session lock is not a regular file of the user")
        deadline = time.monotonic() + LOCK_TIMEOUT
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # Non-blocking attempts (this runs in a worker thread, which a blocking
                # flock would pin past any deadline): the wait stays bounded.
                if time.monotonic() >= deadline:
                    raise AgentrtError(
                        "session_busy", f"another process held this session for over {LOCK_TIMEOUT:g} s"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _save_locked(state_dir: str, session_id: str, payload: bytes) -> None:
    target = _session_path(state_dir, session_id)
    try:
        _check_file(os.lstat(target))
    except FileNotFoundError:
        pass
    except AgentrtError as exc:
        if exc.code != "session_state_oversize":  # an old oversized file may be replaced
            raise
    temp = os.path.join(state_dir, f".{session_id}.{uuid.uuid4().hex}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temp, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)  # exact, whatever the umask
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, target)
        dfd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise AgentrtError("session_state_write_failed", f"cannot write the session file ({exc.strerror})") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
