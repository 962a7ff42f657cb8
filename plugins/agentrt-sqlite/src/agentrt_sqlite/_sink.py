"""The database sink: transcripts appended on the trio thread, the index written by one writer thread.

Each conversation's events go to its transcript file (see
:mod:`agentrt_sqlite._transcript`): the agent's raw output through the
:class:`~agentrt.lowlevel.RawTap` this sink hands out (:meth:`SqliteSink.open_tap`),
and in ``handle()`` the few events a replay cannot decode again
(:mod:`agentrt_sqlite._notes`).  What the index needs of a batch (turn starts
and ends with the capped reply, sessions, exits, bot rows) is appended to an
in-memory group (a lock held for a list append); the writer thread takes the
whole group, writes it in one transaction and commits.  Commits are paced at
``flush_interval`` (20 ms by default).  The policy is ``block``: when
``max_pending`` notes or ``max_pending_bytes`` of reply text wait,
``handle()`` awaits (in a worker thread, abandoning on cancel) until the writer
catches up; nothing is ever dropped.

When the transcript or the database cannot be written (a full disk, an
unwritable or missing directory, a file that is not a database), the sink
gives up once: the next ``handle()``, ``flush()`` or ``aclose()`` raises
``recorder_failed`` naming the file and the reason (the runtime detaches it
with one diagnostic and the conversation goes on unrecorded); every later call
returns quietly, and its taps write nothing more.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
import trio

from agentrt.errors import AgentrtError
from agentrt.events import EventBatch
from agentrt.lowlevel import RawTap, TapInfo

from ._location import database_path
from ._notes import DECODE_ALONE, ConversationLog
from ._recorder import REPLY_LIMIT, ConversationInfo, Note, Recorder
from ._schema import connect
from ._transcript import Transcript, TranscriptTap, transcript_dir, transcript_name

__all__ = ["SqliteSink", "make_sink"]


class SqliteSink:
    """Records conversations: their transcripts, and the conversations and turns they describe in the index.

    Also a :class:`agentrt.lowlevel.TapSource`: :meth:`open_tap` gives each agent process's raw tap.
    """

    name = "sqlite"
    policy: Literal["block"] = "block"

    def __init__(
        self,
        path: Path,
        *,
        info: ConversationInfo | None = None,
        buffer_size: int = 8,
        flush_interval: float = 0.02,
        max_pending: int = 20_000,
        max_pending_bytes: int = 1 << 20,
        reply_limit: int = REPLY_LIMIT,
        close_timeout: float = 10.0,
        writer_nice: int = 10,
    ) -> None:
        self.path = path
        self.info = info or ConversationInfo()
        # handle() returns at once unless the queue is full, so the fan-out's
        # buffer in front of it (whole batches, still decoded) can be short.
        self.buffer_size = buffer_size
        self.flush_interval = flush_interval
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self.reply_limit = reply_limit
        self.close_timeout = close_timeout
        self.writer_nice = writer_nice
        #: The writer thread's id once its priority was lowered (Linux).
        self.writer_tid: int | None = None
        self._cond = threading.Condition()
        self._pending: list[Note] = []
        self._logs: dict[str, ConversationLog] = {}
        self._dir = transcript_dir(path)
        self._pending_events = 0
        self._pending_bytes = 0
        self._closing = False
        self._idle = False  # the writer waits for work
        self._pacing = False  # the writer waits out flush_interval
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._handed_total = 0
        self._close_done = False
        self._gave_up = False  # recorder_failed was raised: later calls drop quietly
        #: Index items committed so far (read by tests and the benchmark).
        self.committed = 0

    # -- transcripts -----------------------------------------------------
    def _log(self, source: str, dialect: str | None = None) -> ConversationLog:
        log = self._logs.get(source)
        if log is None:
            path = self._dir / transcript_name(source)
            transcript = Transcript(path, source, dialect or self.info.dialect, self._transcript_failed)
            log = self._logs[source] = ConversationLog(source, transcript, self.reply_limit)
        return log

    def _transcript_failed(self, path: Path, exc: OSError) -> None:
        # From a tap or handle(): never raises there; the next handle() reports it.
        with self._cond:
            if self._error is None:
                self._error = _TranscriptError(path, exc)
            self._cond.notify_all()

    def open_tap(self, info: TapInfo) -> RawTap | None:
        """The raw tap of one agent process of conversation ``info.conversation_id`` (``None``: not recording)."""
        if self._gave_up or self._closing or self._error is not None:
            return None
        transcript = self._log(info.conversation_id, info.dialect).transcript
        transcript.processes += 1
        transcript.decoded = info.dialect in DECODE_ALONE
        replay = "decode" if transcript.decoded else "events"
        meta = {"process": info.process, "pid": info.pid, "dialect": info.dialect, "replay": replay}
        if transcript.append(b"P", orjson.dumps(meta)) < 0:
            return None
        transcript.taps += 1
        return TranscriptTap(transcript, self._tap_closed)

    def _tap_closed(self, transcript: Transcript) -> None:
        transcript.taps -= 1
        if transcript.taps == 0:
            transcript.release()  # a later record (the exit's) reopens it, and closes it again

    # -- trio side -----------------------------------------------------
    async def handle(self, batch: EventBatch) -> None:
        """Record ``batch`` in its transcript and queue its index note; waits only when the queue is full."""
        if self._gave_up:
            return
        if self._error is not None:
            raise self._failure()
        if self._closing:
            raise AgentrtError("sink_closed", "the sqlite sink is closed")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="agentrt-sqlite-writer", daemon=True)
            self._thread.start()
        note = self._log(batch.source).take(batch)
        if self._error is not None:
            raise self._failure()
        if note is None:
            return
        with self._cond:
            self._pending.append(note)
            self._pending_events += len(note.items)
            self._pending_bytes += note.size
            self._handed_total += len(note.items)
            full = self._full()
            # Wake the writer only when it waits for work, or paces while the
            # queue is full: then waiting out the interval would only stall us.
            if self._idle or (full and self._pacing):
                self._cond.notify_all()
        if full:
            await trio.to_thread.run_sync(self._wait_for_room, abandon_on_cancel=True)
            if self._error is not None:
                raise self._failure()

    async def flush(self) -> None:
        """Wait until everything handed over so far is committed (bounded by ``close_timeout``)."""
        if self._thread is None or self._gave_up:
            return
        target = self._handed()
        with trio.fail_after(self.close_timeout):
            await trio.to_thread.run_sync(self._wait_committed, target, abandon_on_cancel=True)
        if self._error is not None:
            raise self._failure()

    async def aclose(self) -> None:
        """Commit what is queued and stop the writer; idempotent, bounded by ``close_timeout``."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for log in self._logs.values():
            log.transcript.release()
        thread = self._thread
        if thread is not None and thread.is_alive():
            with trio.move_on_after(self.close_timeout) as scope:
                await trio.to_thread.run_sync(thread.join, abandon_on_cancel=True)
            if scope.cancelled_caught:
                raise AgentrtError("sink_close_timeout", "the sqlite writer did not finish in time")
        for log in self._logs.values():
            log.transcript.release()
        if self._error is not None and not self._close_done and not self._gave_up:
            self._close_done = True
            raise self._failure()
        self._close_done = True

    def _full(self) -> bool:
        return self._pending_events >= self.max_pending or self._pending_bytes >= self.max_pending_bytes

    def _handed(self) -> int:
        with self._cond:
            return self._handed_total

    # -- worker and writer threads -----------------------------------------
    def _wait_for_room(self) -> None:
        with self._cond:
            self._cond.wait_for(
                lambda: not self._full() or self._error is not None or self._closing
            )

    def _wait_committed(self, target: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.committed >= target or self._error is not None)

    def _failure(self) -> AgentrtError:
        err = self._error
        path = self.path
        if isinstance(err, _TranscriptError):
            path, err = err.path, err.error
        reason = _storage_fault(err)
        if reason is not None:
            self._gave_up = True
            for log in self._logs.values():
                log.transcript.failed = True  # its taps write nothing more
                log.transcript.release()
            return AgentrtError(
                "recorder_failed",
                f"cannot record to {str(path)!r}: {reason}; the conversation goes on unrecorded",
            )
        if isinstance(err, AgentrtError):
            return err
        return AgentrtError("sink_write_failed", f"the sqlite sink failed: {type(err).__name__}: {err}")

    def _lower_priority(self) -> None:
        # Storing is background work: under CPU contention the agent's stdout pump
        # (and the agent itself) should win.  The GIL is released while SQLite
        # works, so this mostly lowers the priority of that part.  Linux only:
        # there a thread id is a valid target of setpriority and affects only
        # this thread; elsewhere it would name the process, or another one.
        if self.writer_nice > 0 and sys.platform == "linux":
            tid = threading.get_native_id()
            try:
                # Relative to what the thread inherited (agentrt itself may run under
                # nice): setpriority takes an absolute value, capped at 19.
                os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + self.writer_nice))
            except OSError:
                return
            self.writer_tid = tid

    def _run(self) -> None:
        self._lower_priority()
        try:
            db = connect(self.path, foreign_keys=False)
        except BaseException as exc:
            with self._cond:
                self._error = exc
                self._cond.notify_all()
            return
        try:
            recorder = Recorder(db, self.info)
            last = 0.0
            while True:
                with self._cond:
                    self._idle = True
                    self._cond.wait_for(lambda: bool(self._pending) or self._closing)
                    self._idle = False
                    if not self._pending:
                        break
                # Pace commits: a burst waits for the rest of the interval and goes
                # out as one transaction.  handle() wakes us meanwhile only once
                # the queue is full (or on close).
                delay = last + self.flush_interval - time.monotonic()
                with self._cond:
                    if delay > 0:
                        self._pacing = True
                        self._cond.wait_for(lambda: self._full() or self._closing, delay)
                        self._pacing = False
                    group, self._pending = self._pending, []
                    self._pending_events = self._pending_bytes = 0
                    self._cond.notify_all()  # room for waiting handle() calls
                written = recorder.write(group)
                last = time.monotonic()
                with self._cond:
                    self.committed += written
                    self._cond.notify_all()
        except BaseException as exc:
            with self._cond:
                self._error = exc
                self._cond.notify_all()
        finally:
            db.close()


class _TranscriptError(Exception):
    """A transcript file could not be written (its path and the OS's error)."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(str(path))
        self.path = path
        self.error = error


def _storage_fault(err: BaseException | None) -> str | None:
    """Why the file cannot be written, when ``err`` is a storage fault (else ``None``: a bug stays loud).

    The reason is the OS's or SQLite's fixed message (``No space left on
    device``, ``database or disk is full``): neither ever quotes a value.
    """
    if isinstance(err, AgentrtError) and err.code == "database_unavailable":
        err = err.__cause__ or err
        if isinstance(err, AgentrtError):
            return "cannot open it"
    if isinstance(err, OSError):
        return err.strerror or type(err).__name__
    if isinstance(err, sqlite3.DatabaseError):
        return str(err) or type(err).__name__
    return None


def make_sink(options: Mapping[str, Any]) -> SqliteSink:
    """The ``sqlite`` sink factory.

    Options: ``url`` (else ``AGENTRT_DATABASE_URL`` of ``env``), ``env``,
    ``thread`` (link the conversations to this named thread), ``dialect``,
    ``executable``, ``model``, ``agent`` (the configured agent's name),
    ``continues`` (the conversation id this one continues), and the tuning knobs ``buffer_size``,
    ``flush_interval``, ``max_pending``, ``max_pending_bytes``, ``reply_limit``, ``writer_nice``.
    """
    env = dict(options.get("env") or os.environ)
    if options.get("url"):
        env["AGENTRT_DATABASE_URL"] = str(options["url"])
    info = ConversationInfo(
        thread=options.get("thread"),
        dialect=options.get("dialect"),
        executable=options.get("executable"),
        model=options.get("model"),
        agent=options.get("agent"),
        continues=options.get("continues"),
    )
    kwargs: dict[str, Any] = {}
    for key in ("buffer_size", "flush_interval", "max_pending", "max_pending_bytes", "reply_limit", "writer_nice"):
        if key in options:
            kwargs[key] = options[key]
    return SqliteSink(database_path(env), info=info, **kwargs)
