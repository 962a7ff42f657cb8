"""Chat threads in the browser: one live agent process per open thread, turns, Stop, resume.

A thread is opened (its agent CLI spawned, with ``--resume <session id>``
when the thread store remembers one) at its first message after the server
starts, and stays live until the thread is deleted or the server stops.
Every conversation has two sinks: the database's (the thread's history and
native session id) and a :class:`WebSink` that turns event batches into
browser messages on the hub (``coalesce`` policy: a slow page never slows the
agent).

What reaches the browser is a projection of the events, never the events
themselves: tool steps carry their bounded label (``ToolUse.summary``), not
their input; diagnostics carry their code; raw protocol objects never leave
the server.  Finished replies are rendered to safe HTML on the server.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from agentrt.errors import AgentrtError
from agentrt.events import (
    Diagnostic,
    EventBatch,
    ProcessExited,
    SessionStarted,
    Status,
    TextDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from agentrt.threads import ThreadBrowser, ThreadRecord, ThreadStore

from ._hub import Hub, sse_frame
from ._render import render_markdown, title_of

__all__ = ["ChatManager", "WebSink", "LiveState", "frame_interval", "valid_thread_name"]

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_PROMPT = 100_000
_OPEN_TIMEOUT = 30.0
#: At most one text frame per this interval while a reply streams (a display refresh):
#: text arriving meanwhile is held and sent as one, so pages cost the same whatever the
#: agent's line rate.  The first text of a burst, and anything but text, go out at once.
FRAME_INTERVAL = 1 / 20
#: Text frames per second for all of a thread's pages together: with many pages open the
#: interval grows (each frame is a write per page), up to :data:`MAX_FRAME_INTERVAL`.
FRAME_BUDGET = 500
MAX_FRAME_INTERVAL = 1 / 4
_CLOSE_TIMEOUT = 15.0
# How long a message waits for the previous turn's task to notice its end.
_IDLE_GRACE = 1.0


def frame_interval(pages: int) -> float:
    """Seconds between text frames for a thread that ``pages`` streams watch."""
    return min(MAX_FRAME_INTERVAL, max(FRAME_INTERVAL, pages / FRAME_BUDGET))


def valid_thread_name(name: str) -> bool:
    """Names the web UI accepts in URLs: 1-64 of ``[A-Za-z0-9._-]``."""
    return 0 < len(name) <= 64 and all(c in _NAME_CHARS for c in name) and name not in (".", "..")


@attrs.define
class LiveState:
    """What the page needs to draw a turn in flight (also rendered on reload)."""

    turn: int | None = None
    prompt: str = ""
    text: list[str] = attrs.Factory(list)
    steps: list[dict[str, Any]] = attrs.Factory(list)
    status: str = ""
    started_mono: float = 0.0

    def public(self) -> dict[str, Any]:
        """JSON for the page."""
        return {"turn": self.turn, "prompt": self.prompt, "text": "".join(self.text), "steps": self.steps,
                "status": self.status}


def _usage(u: Any) -> dict[str, int] | None:
    return u.to_dict() if u is not None else None


class WebSink:
    """Projects one thread's event batches to browser messages on ``thread:<name>``."""

    name = "web"
    policy = "coalesce"
    buffer_size = 64

    def __init__(self, hub: Hub, thread: str, nursery: trio.Nursery | None = None) -> None:
        self.hub = hub
        self.thread = thread
        self.topic = f"thread:{thread}"
        self.live = LiveState()
        # Text waiting for the next frame (pacing needs ``nursery`` for its flush task).
        self._nursery = nursery
        self._held: list[str] = []
        self._held_wall = 0.0
        self._flush_pending = False
        self._next_text_frame = 0.0
        #: Terminal messages delivered so far (tests wait on them).
        self.terminals = 0

    async def handle(self, batch: EventBatch) -> None:
        """Project one batch; publish it now, or hold its text for the next frame."""
        out: list[dict[str, Any]] = []
        live = self.live
        pieces: list[str] = []  # consecutive text, joined once (a chunk can hold ~1000 deltas)
        for ev in batch.events:
            cls = type(ev)
            if cls is TextDelta:
                pieces.append(ev.text)  # type: ignore[attr-defined]
                continue
            if pieces:
                self._text(out, pieces)
                pieces = []
            if cls is TurnStarted:
                live.turn = ev.turn  # type: ignore[attr-defined]
                live.prompt = ev.prompt  # type: ignore[attr-defined]
                live.text, live.steps, live.status = [], [], ""
                live.started_mono = batch.mono
                out.append({"k": "turn_started", "turn": live.turn, "prompt": live.prompt})
            elif cls is ToolUse:
                step = {"id": ev.id, "label": ev.summary or "Working", "state": "running"}  # type: ignore[attr-defined]
                live.steps.append(step)
                out.append({"k": "tool", **step})
            elif cls is ToolResult:
                tid = ev.tool_use_id  # type: ignore[attr-defined]
                state = "error" if ev.is_error else "done"  # type: ignore[attr-defined]
                for step in live.steps:
                    if step["id"] == tid:
                        step["state"] = state
                out.append({"k": "tool_result", "id": tid, "state": state})
            elif cls is Status:
                label = _status_label(ev)
                live.status = label
                out.append({"k": "status", "kind": ev.kind, "label": label})  # type: ignore[attr-defined]
            elif cls is TurnCompleted or cls is TurnFailed:
                out.append(await self._terminal(ev, batch))
            elif cls is SessionStarted:
                out.append({"k": "session", "model": ev.model})  # type: ignore[attr-defined]
            elif cls is Diagnostic:
                out.append({"k": "diagnostic", "code": ev.code})  # type: ignore[attr-defined]
            elif cls is ProcessExited:
                out.append({"k": "exited", "requested": ev.requested})  # type: ignore[attr-defined]
        if pieces:
            self._text(out, pieces)
        if not out:
            return
        now = trio.current_time()
        text_only = len(out) == 1 and out[0]["k"] == "text"
        if text_only and self._nursery is not None and (self._held or now < self._next_text_frame):
            # Pace text: hold it for the next frame (a display refresh) instead of sending a
            # frame per chunk.  Holding here, rather than awaiting, keeps this sink fast, so the
            # conversation never has to merge batches for it.
            if not self._held:
                self._held_wall = batch.wall
            self._held.append(out[0]["text"])
            if not self._flush_pending:
                self._flush_pending = True
                self._nursery.start_soon(self._flush_later)
            return
        self._publish(out, batch.wall, now)

    def _text(self, out: list[dict[str, Any]], pieces: list[str]) -> None:
        text = pieces[0] if len(pieces) == 1 else "".join(pieces)
        self.live.text.append(text)
        out.append({"k": "text", "text": text})

    def _publish(self, out: list[dict[str, Any]], wall: float, now: float) -> None:
        if self._held:
            # Held text goes first: the page sees everything in order.
            out.insert(0, {"k": "text", "text": "".join(self._held)})
            wall = self._held_wall
            self._held = []
        if any(m["k"] == "text" for m in out):
            self._next_text_frame = now + frame_interval(self.hub.subscribers(self.topic))
        # ``t`` is when the runtime decoded the (first) chunk: the page-latency benchmark reads it.
        self.hub.publish(self.topic, sse_frame({"t": wall, "m": out}))

    async def _flush_later(self) -> None:
        try:
            await trio.sleep_until(self._next_text_frame)
        finally:
            self._flush_pending = False
        if self._held:
            self._publish([], self._held_wall, trio.current_time())

    async def _terminal(self, ev: Any, batch: EventBatch) -> dict[str, Any]:
        live = self.live
        reply = "".join(live.text)
        if not reply and isinstance(ev, TurnCompleted) and ev.result:
            reply = ev.result
        # A long reply's Markdown is real CPU work: render it off the trio thread.
        html = render_markdown(reply) if len(reply) < 20_000 else await trio.to_thread.run_sync(render_markdown, reply)
        msg: dict[str, Any] = {
            "k": "done" if isinstance(ev, TurnCompleted) else "failed",
            "turn": live.turn,
            "html": html,
            "usage": _usage(ev.usage),
            "duration": round(max(0.0, batch.mono - live.started_mono), 3) if live.turn is not None else None,
        }
        if isinstance(ev, TurnFailed):
            msg["code"] = ev.code
            msg["message"] = ev.message[:500]
        self.live = LiveState()
        self.terminals += 1
        return msg

    async def aclose(self) -> None:
        """Nothing to flush: browsers reload state from the server."""


def _status_label(ev: Any) -> str:
    kind = ev.kind
    if kind == "rate_limit":
        resets = ev.detail.get("resetsAt") if isinstance(ev.detail, Mapping) else None
        return f"Rate limited{f' (resets at {resets})' if isinstance(resets, (int, str)) else ''}; waiting"
    if "retry" in str(kind) or "retry" in str(ev.label).lower():
        return f"Retrying: {ev.label}" if ev.label else "Retrying"
    return str(ev.label or kind)[:120]


@attrs.define(eq=False)
class _Live:
    name: str
    sink: WebSink
    conv: Any = None
    closing: trio.Event = attrs.Factory(trio.Event)
    closed: trio.Event = attrs.Factory(trio.Event)
    busy: bool = False
    idle: trio.Event = attrs.Factory(trio.Event)
    last_prompt: str = ""
    db_sink: Any = None


class ChatManager:
    """Every open thread of this server, inside the server's nursery."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        plugins: Any,
        env: Mapping[str, str],
        hub: Hub,
        store: ThreadStore,
        launch: Any,
        term_grace: float | None = None,
        agent: str | None = None,
    ) -> None:
        self._nursery = nursery
        self.plugins = plugins
        self.env = dict(env)
        self.hub = hub
        self.store = store
        #: The store's listing, history and deletion, when it offers them.
        self.browser: ThreadBrowser | None = store if isinstance(store, ThreadBrowser) else None
        self.launch = launch
        #: The configured agent's name (``agentrt web -a NAME``), recorded with each conversation.
        self.agent = agent
        self.term_grace = term_grace
        self._live: dict[str, _Live] = {}
        self._opening: dict[str, trio.Lock] = {}
        self._titles: dict[str, str] = {}

    # -- queries -------------------------------------------------------
    def live(self, name: str) -> _Live | None:
        """The open thread ``name``, if any."""
        return self._live.get(name)

    async def list_threads(self, query: str = "") -> list[dict[str, Any]]:
        """Threads for the sidebar, most recent first, filtered by ``query`` (title or name)."""
        if self.browser is None:
            return []
        rows = await self.browser.list_threads()
        out: list[dict[str, Any]] = []
        q = query.strip().lower()
        for row in rows[:500]:
            name = row.record.name
            if not valid_thread_name(name):
                continue
            title = await self._title(name)
            if q and q not in title.lower() and q not in name.lower():
                continue
            out.append({"name": name, "title": title, "updated_at": row.updated_at, "turns": row.turns,
                        "live": name in self._live})
        return out

    async def _title(self, name: str) -> str:
        # A title never changes once the first turn exists: remember it (one query per thread, once).
        cached = self._titles.get(name)
        if cached is not None:
            return cached
        turns = await self.turns(name, limit=1)
        if not turns:
            return name
        title = self._titles[name] = title_of(turns[0]["prompt"], name)
        return title

    async def turns(self, name: str, limit: int | None = None) -> list[Mapping[str, Any]]:
        """The thread's stored turns, oldest first."""
        if self.browser is None:
            return []
        return list(await self.browser.thread_turns(name, limit))

    async def settle(self, name: str) -> None:
        """Wait (bounded) until the database has every event of the thread handed over so far.

        A page drawn from the database right after a turn ended then shows that turn.
        """
        live = self._live.get(name)
        flush = getattr(live.db_sink, "flush", None) if live is not None else None
        if flush is not None:
            with trio.move_on_after(2.0):
                try:
                    await flush()
                except AgentrtError:
                    pass

    async def exists(self, name: str) -> bool:
        """Whether the store knows the thread (or it is open here)."""
        return name in self._live or await self.store.get_thread(name) is not None

    # -- actions ---------------------------------------------------------
    async def create(self) -> str:
        """A new, empty thread; returns its name."""
        name = f"web-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        await self.store.save_thread(ThreadRecord(
            name=name, dialect=self.launch.protocol, executable=self.launch.executable, model=self.launch.model))
        return name

    async def delete(self, name: str) -> bool:
        """Stop the thread's agent (if open) and forget the thread."""
        live = self._live.get(name)
        if live is not None:
            await self._close(live)
        if self.browser is None:
            raise AgentrtError("thread_delete_unsupported", "the thread store cannot delete threads")
        ok = await self.browser.delete_thread(name)
        self._titles.pop(name, None)
        return ok

    async def send(self, name: str, text: str) -> None:
        """Start a turn on ``name`` (opening the thread first); returns once the turn is under way."""
        if not text.strip():
            raise AgentrtError("empty_prompt", "the message is empty")
        if len(text) > MAX_PROMPT:
            raise AgentrtError("prompt_too_long", f"messages are limited to {MAX_PROMPT} characters")
        live = await self.open(name)
        if live.busy:
            # The page may have shown the terminal a moment before the turn's task saw it.
            with trio.move_on_after(_IDLE_GRACE):
                await live.idle.wait()
        if live.busy:
            raise AgentrtError("turn_in_progress", "the previous turn has not ended")
        live.busy = True
        live.idle = trio.Event()
        live.last_prompt = text
        started = trio.Event()
        self._nursery.start_soon(self._turn, live, text, started)
        with trio.move_on_after(5):
            await started.wait()

    async def cancel(self, name: str) -> bool:
        """Stop the turn in flight (the thread stays open); ``False`` if none was running."""
        live = self._live.get(name)
        if live is None or live.conv is None or not live.busy:
            return False
        await live.conv.cancel_turn()
        return True

    async def open(self, name: str) -> _Live:
        """The live thread ``name``, spawning its agent (resuming its session) if needed."""
        live = self._live.get(name)
        if live is not None and live.conv is not None:
            return live
        lock = self._opening.setdefault(name, trio.Lock())
        async with lock:
            live = self._live.get(name)
            if live is not None and live.conv is not None:
                return live
            if self.browser is not None:
                record, _diag = await self.browser.check_thread(name)
            else:
                record = await self.store.get_thread(name)
            if record is None:
                raise AgentrtError("unknown_thread", f"no thread named {name!r}")
            live = _Live(name=name, sink=WebSink(self.hub, name, self._nursery))
            with trio.fail_after(_OPEN_TIMEOUT):
                await self._nursery.start(self._host, live, record.session_id)
            self._live[name] = live
            return live

    async def _host(self, live: _Live, resume: str | None, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from agentrt import open_conversation

        sinks: list[Any] = [live.sink]
        factory = self.plugins.sink_for("recorder")
        if factory is not None:
            try:
                live.db_sink = factory({"env": self.env, "thread": live.name, "dialect": self.launch.protocol,
                                        "executable": self.launch.executable, "model": self.launch.model,
                                        "agent": self.agent})
                sinks.append(live.db_sink)
            except AgentrtError:
                raise
            except Exception as exc:  # a broken database plugin: say so with a code, not a 500
                raise AgentrtError("database_sink_failed", f"the database sink could not start: "
                                   f"{type(exc).__name__}") from exc
        started = False
        try:
            async with open_conversation(self.launch, plugins=self.plugins, resume=resume, sinks=sinks,
                                         parent_env=self.env, term_grace=self.term_grace) as conv:
                live.conv = conv
                started = True
                task_status.started()
                await live.closing.wait()
        except AgentrtError:
            if not started:
                raise
        except Exception as exc:  # a broken thread must not take the server down
            if not started:
                raise
            print(f"agentrt web: thread {live.name!r} ended: {type(exc).__name__}", file=sys.stderr)
        finally:
            live.conv = None
            if self._live.get(live.name) is live:
                del self._live[live.name]
            live.closed.set()

    async def _turn(self, live: _Live, text: str, started: trio.Event) -> None:
        conv = live.conv
        try:
            if conv is None:
                raise AgentrtError("session_exited", "the thread is closed")
            stream = conv.send(text)
            first = True
            async for event in stream:
                if first:
                    started.set()
                    first = False
                if isinstance(event, (TurnCompleted, TurnFailed)):
                    self._idle(live)  # the next message may go now; saving the thread can trail
            if conv.session_id:
                await self.store.save_thread(ThreadRecord(
                    name=live.name, dialect=self.launch.protocol, executable=self.launch.executable,
                    model=conv.model, session_id=conv.session_id))
        except AgentrtError as exc:
            # Failures before the turn reached the agent: show them as the turn's error bubble.
            self.hub.publish(live.sink.topic, sse_frame({"t": time.time(), "m": [
                {"k": "failed", "turn": None, "html": "", "usage": None, "duration": None,
                 "code": exc.code, "message": exc.detail[:500]}]}))
        finally:
            self._idle(live)
            started.set()

    @staticmethod
    def _idle(live: _Live) -> None:
        live.busy = False
        live.idle.set()

    async def _close(self, live: _Live) -> None:
        live.closing.set()
        with trio.move_on_after(_CLOSE_TIMEOUT):
            await live.closed.wait()

    async def aclose(self) -> None:
        """Stop every open thread's agent (bounded)."""
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as n:
                for live in list(self._live.values()):
                    n.start_soon(self._close, live)
