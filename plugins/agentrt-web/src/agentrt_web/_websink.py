"""What a thread's events look like in the browser: :class:`WebSink` and the turn in flight.

A projection of the events, never the events themselves: tool steps carry
their bounded label (``ToolUse.summary``), not their input; diagnostics carry
their code; raw protocol objects never leave the server.  Text frames are
paced per display refresh, and the Markdown of a streaming reply is rendered
at a bounded rate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from agentrt.display import escape_text
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
from agentrt.labels import tool_label

from ._hub import Hub, sse_frame
from ._render import render_markdown, utf16_len

__all__ = ["WebSink", "LiveState", "frame_interval", "step_text"]

#: At most one text frame per this interval while a reply streams (a display refresh):
#: text arriving meanwhile is held and sent as one, so pages cost the same whatever the
#: agent's line rate.  The first text of a burst, and anything but text, go out at once.
FRAME_INTERVAL = 1 / 20
#: Text frames per second for all of a thread's pages together: with many pages open the
#: interval grows (each frame is a write per page), up to :data:`MAX_FRAME_INTERVAL`.  250 keeps
#: 50 pages within 1.1x the server's CPU per line of none (bench/web.py; 500 cost 1.2x-1.4x).
FRAME_BUDGET = 250
MAX_FRAME_INTERVAL = 1 / 4
#: While a reply streams, its Markdown so far is rendered at most this often (shared by all
#: of the thread's pages); a render that took long stretches the interval to 10x its cost.
MD_INTERVAL = 0.25
#: Bytes of live Markdown per second for all of a thread's pages together: each rendering is the whole
#: reply so far, sent to every page, so with many pages or a long reply the interval grows to keep to it.
MD_BUDGET = 4 << 20
#: Past this length the reply streams as plain text until it ends (rendering it live would cost too much).
MD_LIVE_MAX = 200_000
#: Text in bulk (more deltas than this since the last frame; a model streaming words sends tens) is
#: paced by the server's CPU time as well as the clock: a frame waits for an interval of the server's
#: CPU, at most :data:`BULK_HOLD` intervals.  So when the server gets less of a core (a loaded machine)
#: its pages get fewer frames, and their writes keep to the same share of its CPU.
BULK_DELTAS = 256
BULK_HOLD = 4


def frame_interval(pages: int) -> float:
    """Seconds between text frames for a thread that ``pages`` streams watch."""
    return min(MAX_FRAME_INTERVAL, max(FRAME_INTERVAL, pages / FRAME_BUDGET))


@attrs.define
class LiveState:
    """What the page needs to draw a turn in flight (also rendered on reload)."""

    turn: int | None = None
    key: str = ""
    prompt: str = ""
    text: list[str] = attrs.Factory(list)
    steps: list[dict[str, Any]] = attrs.Factory(list)
    status: str = ""
    started_mono: float = 0.0

    def public(self) -> dict[str, Any]:
        """JSON for the page."""
        return {"turn": self.turn, "key": self.key, "prompt": self.prompt, "text": "".join(self.text),
                "steps": self.steps, "status": self.status}


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
        # When the last text frame went out (trio clock, process CPU), the interval it set, deltas since.
        self._frame_mono = 0.0
        self._frame_cpu = 0.0
        self._frame_gap = 0.0
        self._deltas = 0
        #: The server's CPU time (this process, all threads): what busy pacing counts.
        self.cpu_clock: Callable[[], float] = time.process_time
        # A live Markdown rendering waiting for the next text frame: (message, its pause, the text pieces it covers).
        self._held_md: tuple[dict[str, Any], float, int] | None = None
        #: Terminal messages delivered so far (tests wait on them).
        self.terminals = 0
        self._md_pending = False
        self._next_md = 0.0
        #: The key of the turn being sent (set by the chat before it sends; pages name it in a Stop).
        self.turn_key = ""
        #: A tool step came since the last text (the next text starts a paragraph).
        self._after_tool = False

    async def handle(self, batch: EventBatch) -> None:
        """Project one batch; publish it now, or hold its text for the next frame."""
        out: list[dict[str, Any]] = []
        live = self.live
        pieces: list[str] = []  # consecutive text, joined once (a chunk can hold ~1000 deltas)
        for ev in batch.events:
            # Dispatch by exact class, text deltas (nearly every event) first: ``type(ev) is X``
            # per branch narrows ``ev`` for mypy at the cost of the ``type(ev)`` once held in a
            # local; ``match`` on classes costs twice as much (bench/dispatch.py).
            if type(ev) is TextDelta:
                pieces.append(ev.text)
                continue
            if pieces:
                self._text(out, pieces)
                pieces = []
            if type(ev) is ToolUse:
                self._after_tool = True
                out.append({"k": "tool", **self._step(ev)})
            elif type(ev) is ToolResult:
                self._after_tool = True
                tid = ev.tool_use_id
                state = "error" if ev.is_error else "done"
                for step in live.steps:
                    if step["id"] == tid:
                        step["state"] = state
                out.append({"k": "tool_result", "id": tid, "state": state})
            elif type(ev) is TurnStarted:
                self._after_tool = False
                live.turn = ev.turn
                live.prompt = ev.prompt
                live.text, live.steps, live.status = [], [], ""
                live.key = self.turn_key
                live.started_mono = batch.mono
                out.append({"k": "turn_started", "turn": live.turn, "key": live.key, "prompt": live.prompt})
            elif type(ev) is Status:
                label = _status_label(ev)
                live.status = label
                # A progress word of the agent's (waiting for the model) gives way to what comes next.
                out.append({"k": "status", "kind": ev.kind, "label": label, "transient": ev.kind == "status"})
            elif type(ev) is TurnCompleted or type(ev) is TurnFailed:
                out.append(await self._terminal(ev, batch))
            elif type(ev) is SessionStarted:
                out.append({"k": "session", "model": ev.model})
            elif type(ev) is Diagnostic:
                out.append({"k": "diagnostic", "code": ev.code})
            elif type(ev) is ProcessExited:
                out.append({"k": "exited", "requested": ev.requested})
        if pieces:
            self._text(out, pieces)
        if not out:
            return
        now = trio.current_time()
        text_only = len(out) == 1 and out[0]["k"] == "text"
        if text_only and self._nursery is not None and (
                self._held or now < self._next_text_frame or self._cpu_wait(now)):
            # Pace text: hold it for the next frame (a display refresh) instead of sending a
            # frame per chunk.  Holding here, rather than awaiting, keeps this sink fast, so the
            # conversation never has to merge batches for it.
            if not self._held:
                self._held_wall = batch.wall
            self._held.append(out[0]["text"])
            self._hold_for_frame()
            return
        self._publish(out, batch.wall, now)

    def _step(self, ev: Any) -> dict[str, Any]:
        # A streaming dialect reports a call twice (at its start, then with its input): one step,
        # relabelled.  The label is the dialect's bounded summary, else the runtime's own.
        # An agent writes its calls' titles: every control, bidi or invisible character shown escaped.
        label = escape_text(ev.summary or tool_label(ev.name, ev.input))
        subject = _subject(label)
        label = _running(label)
        for step in self.live.steps:
            if step["id"] == ev.id and ev.id:
                step["label"], step["subject"] = label, subject
                return step
        step = {"id": ev.id, "label": label, "subject": subject, "state": "running"}
        self.live.steps.append(step)
        return step

    def _text(self, out: list[dict[str, Any]], pieces: list[str]) -> None:
        text = pieces[0] if len(pieces) == 1 else "".join(pieces)
        self._deltas += len(pieces)
        if self._after_tool:
            # Words after a tool call are a new message of the agent's: a paragraph of their own,
            # not glued to the sentence before the call ("I will run it.The tool said: hi").
            self._after_tool = False
            if self.live.text and not self.live.text[-1].endswith("\n\n"):
                text = ("\n" if self.live.text[-1].endswith("\n") else "\n\n") + text
        if not self.live.text:
            # The first words go out as text: a rendering pays off once there is some to render.
            self._next_md = trio.current_time() + MD_INTERVAL
        self.live.text.append(text)
        out.append({"k": "text", "text": text})
        if not self._md_pending and self._nursery is not None:
            self._md_pending = True
            self._nursery.start_soon(self._render_later, self.live)

    def _publish(self, out: list[dict[str, Any]], wall: float, now: float) -> None:
        held_md = self._held_md
        if held_md is not None:
            self._held_md = None
            if not any(m["k"] in ("done", "failed") for m in out):  # (the end carries the whole reply's)
                out.insert(0, held_md[0])
        if self._held:
            # Held text goes first: the page sees everything in order (a rendering covers only text before it).
            out.insert(0, {"k": "text", "text": "".join(self._held)})
            wall = self._held_wall
            self._held = []
        if any(m["k"] in ("text", "md") for m in out):
            self._frame_gap = frame_interval(self.hub.subscribers(self.topic))
            self._next_text_frame = now + self._frame_gap
            self._frame_mono, self._frame_cpu = now, self.cpu_clock()
            self._deltas = 0
        # ``t`` is when the runtime decoded the (first) chunk: the page-latency benchmark reads it.
        self.hub.publish(self.topic, sse_frame({"t": wall, "m": out}))
        if held_md is not None:
            self._rendered(held_md[1], held_md[2], now)

    def _cpu_wait(self, now: float) -> float:
        """Seconds a held frame still waits for the server's CPU time (0: it may go; see :data:`BULK_DELTAS`)."""
        if self._deltas <= BULK_DELTAS:
            return 0.0
        cpu = self.cpu_clock() - self._frame_cpu
        wall = now - self._frame_mono
        if cpu >= self._frame_gap or wall >= BULK_HOLD * self._frame_gap:
            return 0.0
        # Check again when the CPU time, at the rate it went since the frame, will have come.
        rate = max(cpu / wall, 1 / BULK_HOLD) if wall > 0 else 1.0
        return max(1e-3, min((self._frame_gap - cpu) / rate, BULK_HOLD * self._frame_gap - wall))

    def _hold_for_frame(self) -> None:
        if not self._flush_pending and self._nursery is not None:
            self._flush_pending = True
            self._nursery.start_soon(self._flush_later)

    async def _flush_later(self) -> None:
        try:
            while True:
                await trio.sleep_until(self._next_text_frame)
                wait = self._cpu_wait(trio.current_time())
                if not wait:
                    break
                self._next_text_frame = trio.current_time() + wait
        finally:
            self._flush_pending = False
        if self._held or self._held_md is not None:
            self._publish([], self._held_wall if self._held else time.time(), trio.current_time())

    async def _render_later(self, live: LiveState) -> None:
        """Send the Markdown of the reply so far (``md``): the page shows it, plus the text after it.

        The rendering goes out with the next text frame (one write per page for both), or at once
        when no frame is due; the next rendering waits until it has gone out.
        """
        held = False
        try:
            await trio.sleep_until(self._next_md)
            pieces = len(live.text)
            text = "".join(live.text)
            if self.live is not live or len(text) > MD_LIVE_MAX or not self.hub.subscribers(self.topic):
                return  # (a page that opens later is drawn with the reply so far already rendered)
            began = trio.current_time()
            html = render_markdown(text) if len(text) < 20_000 else await trio.to_thread.run_sync(render_markdown, text)
            now = trio.current_time()
            if self.live is not live:
                return  # the turn ended meanwhile: its final rendering is already on its way
            pages = self.hub.subscribers(self.topic)
            gap = max(MD_INTERVAL, 10 * (now - began), len(html) * pages / MD_BUDGET)
            # ``n`` counts UTF-16 code units, as the page's strings do: the page keeps the text after it.
            self._held_md = ({"k": "md", "turn": live.turn, "html": html, "n": utf16_len(text)}, gap, pieces)
            held = True
        finally:
            if not held:
                self._md_pending = False
        if self._held or now < self._next_text_frame:
            self._hold_for_frame()
        else:
            self._publish([], time.time(), now)

    def _rendered(self, gap: float, pieces: int, now: float) -> None:
        # A rendering went out: the next one waits ``gap`` from now, and only if text came since.
        self._next_md = now + gap
        self._md_pending = False
        live = self.live
        if len(live.text) > pieces and self._nursery is not None:
            self._md_pending = True
            self._nursery.start_soon(self._render_later, live)

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
        # A step the agent never reported a result for is closed with its turn.
        closed = "done" if isinstance(ev, TurnCompleted) else "stopped"
        msg["steps"] = [s["id"] for s in live.steps if s["state"] == "running"]
        msg["step_state"] = closed
        self.live = LiveState()
        self.terminals += 1
        return msg

    async def aclose(self) -> None:
        """Nothing to flush: browsers reload state from the server."""


#: A step's words once it has ended (the page shows ``<subject> — <word>``).
STEP_WORDS = {"done": "done", "error": "failed", "stopped": "stopped"}
#: Progress words agents send as they are (Claude Code's ``system/status``), in words for a person.
_STATUS_WORDS = {"requesting": "Waiting for the model", "compacting": "Compacting the conversation"}
#: What the page shows for a status of these kinds, whatever its (machine) label says.
_STATUS_KINDS = {"api_error": "The API answered with an error"}
_MACHINE_WORD = re.compile(r"[a-z0-9]+(?:[_.-][a-z0-9]+)*")


def _subject(label: str) -> str:
    """What a step is about, without the verb of a running step (``Running: git status`` → ``git status``)."""
    for verb in ("Running: ", "Running "):
        if label.startswith(verb) and len(label) > len(verb):
            return label[len(verb):]
    return label


def _running(label: str) -> str:
    """A running step's text: its label when that says so (``Running: …``, ``Editing …``), else ``Running: <label>``.

    An ACP agent's own titles (``Read file``, ``git status``) would not say that the step is under way.
    """
    first = label.split(" ", 1)[0]
    return label if not label or label.startswith("Running") or first.endswith("ing") else f"Running: {label}"


def step_text(step: Mapping[str, Any]) -> str:
    """A step as the page reads it: its label while it runs (``Running: git status``), then ``git status — done``."""
    word = STEP_WORDS.get(str(step.get("state")))
    if word is None:
        return str(step.get("label", ""))
    return f"{step.get('subject') or _subject(str(step.get('label', '')))} — {word}"


def _status_label(ev: Any) -> str:
    """The status line for ``ev`` in words for a person: never a raw protocol word (``requesting``, ``in_progress``)."""
    kind = ev.kind
    if kind == "rate_limit":
        resets = ev.detail.get("resetsAt") if isinstance(ev.detail, Mapping) else None
        return f"Rate limited{f' (resets at {resets})' if isinstance(resets, (int, str)) else ''}; waiting"
    if "retry" in str(kind) or "retry" in str(ev.label).lower():
        return f"Retrying: {ev.label}" if ev.label else "Retrying"
    if kind in _STATUS_KINDS:
        return _STATUS_KINDS[kind]
    label = escape_text(str(ev.label or "").strip())
    if kind == "mode" and label:
        return f"Mode: {label}"[:120]
    if not label or _MACHINE_WORD.fullmatch(label):
        # A bare protocol word is shown only when it has words for a person; else nothing.
        return _STATUS_WORDS.get(label, "")
    return label[:120]
