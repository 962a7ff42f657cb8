"""A stored turn's tool steps, from the thread's replayed events: what a reopened thread shows.

The live page draws each tool step as it comes (``Running: git status``, then
``git status — done``); a thread opened later has only its turn rows, which
hold no steps.  :func:`stored_steps` reads the thread's events through the
store's public replay API (``thread_events``, page by page, as the failure
messages are read) and projects them exactly as the live sink does: the same
bounded label with every control, bidi or invisible character escaped, the
same states (a step the agent never answered ends ``stopped``).

It also notes where in each reply a tool step came (the reply's character
count at that point): the live page starts the words after a tool call on a
paragraph of their own, and :func:`break_after_steps` does the same to a
stored reply, so a reopened thread does not run "I will run it." and "The
tool said: hi" together.

Bounded: at most :data:`STEP_PAGES` times :data:`PAGE` events are read per
view (a thread longer than that shows its later turns' steps only live); a
page holds about :data:`PAGE_TEXT` characters of text (fewer events a page
when they are long); at most :data:`MAX_STEPS` steps are kept per turn; and a
thread's steps are cached by the identity of its finished turns, so reopening
it replays nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.display import escape_text
from agentrt.labels import tool_label
from agentrt.threads import ThreadHistory

from ._websink import _running, _subject, step_text

__all__ = ["StoredSteps", "stored_steps", "with_steps", "break_after_steps", "STEP_PAGES", "PAGE", "MAX_STEPS"]

#: Events read per page of the store's replay.
PAGE = 1000
#: Pages read per view at most (200,000 events).
STEP_PAGES = 200
#: Characters of text a page should hold at most (its events are read fewer at a time when longer).
PAGE_TEXT = 1 << 20
#: Steps kept per turn (a runaway agent's thousands of calls would not fit a page anyway).
MAX_STEPS = 200

TurnKey = tuple[str, int]


class StoredSteps:
    """Per turn, by ``(conversation_id, turn)``: its steps (dicts as the live sink makes) and break offsets."""

    def __init__(self) -> None:
        self.steps: dict[TurnKey, list[dict[str, Any]]] = {}
        self.breaks: dict[TurnKey, list[int]] = {}


_CACHE: OrderedDict[tuple[Any, ...], StoredSteps] = OrderedDict()
_CACHE_SIZE = 32


def _identity(store: Any, name: str, turns: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    return (id(store), name, *((t.get("conversation_id"), t.get("turn"), t.get("outcome")) for t in turns))


async def stored_steps(store: Any, name: str, turns: Sequence[Mapping[str, Any]]) -> StoredSteps:
    """The tool steps of thread ``name``'s stored ``turns`` (none when the store cannot replay events)."""
    reader = store.thread_events if isinstance(store, ThreadHistory) else None
    if reader is None or not turns:
        return StoredSteps()
    finished = all(t.get("outcome") not in (None, "running") for t in turns)
    key = _identity(store, name, turns)
    if finished and key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    out = StoredSteps()
    current: dict[str, TurnKey] = {}  # conversation -> the turn its events belong to now
    chars: dict[TurnKey, int] = {}  # characters of text so far in each turn
    after = 0
    limit = 16  # grows to PAGE while the events are short
    read = 0
    while read < STEP_PAGES * PAGE:
        page, after = await reader(name, after=after, limit=limit)
        if not page:
            break
        read += len(page)
        text = 0
        for env in page:
            text += _project(env, current, chars, out)
        # A page holds its events' text: fewer events a page when they are long (a 50 MB reply in
        # a few hundred deltas), so a page's memory stays about PAGE_TEXT whatever the deltas' size.
        limit = max(8, min(PAGE, limit * PAGE_TEXT // max(1, text)))
    if finished:
        _CACHE[key] = out
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return out


def _project(env: Mapping[str, Any], current: dict[str, TurnKey], chars: dict[TurnKey, int], out: StoredSteps) -> int:
    """Note one event; the characters of text it held."""
    ev = env.get("event") or {}
    kind = ev.get("type")
    source = str(env.get("source"))
    if kind == "text_delta":
        size = len(str(ev.get("text", "")))
        turn = current.get(source)
        if turn is not None:
            chars[turn] = chars.get(turn, 0) + size
        return size
    if kind == "turn_started" and isinstance(ev.get("turn"), int):
        current[source] = (source, ev["turn"])
        return 0
    turn = current.get(source)
    if turn is None:
        return 0
    if kind == "tool_use":
        _step(out.steps.setdefault(turn, []), ev)
    elif kind == "tool_result":
        state = "error" if ev.get("is_error") else "done"
        for step in out.steps.get(turn, []):
            if step["id"] == ev.get("tool_use_id"):
                step["state"] = state
    elif kind in ("turn_completed", "turn_failed"):
        for step in out.steps.get(turn, []):
            if step["state"] == "running":  # never answered: ended with its turn, as the live page shows it
                step["state"] = "stopped"
        current.pop(source, None)
        return 0
    else:
        return 0
    breaks = out.breaks.setdefault(turn, [])
    at = chars.get(turn, 0)
    if at and (not breaks or breaks[-1] != at):
        breaks.append(at)
    return 0


def _step(steps: list[dict[str, Any]], ev: Mapping[str, Any]) -> None:
    # As the live sink's: a call reported twice (at its start, then with its input) is one step, relabelled.
    summary = ev.get("summary")
    if not isinstance(summary, str) or not summary:
        summary = tool_label(ev.get("name"), ev.get("input"))
    label = escape_text(summary)
    subject, label = _subject(label), _running(label)
    sid = str(ev.get("id") or "")
    for step in steps:
        if sid and step["id"] == sid:
            step["label"], step["subject"] = label, subject
            return
    if len(steps) < MAX_STEPS:
        steps.append({"id": sid, "label": label, "subject": subject, "state": "running"})


def with_steps(turn: Mapping[str, Any], shown: StoredSteps) -> Mapping[str, Any]:
    """``turn`` with ``steps`` (each with the ``text`` the page shows) and its reply broken after them."""
    number = turn.get("turn")
    if not isinstance(number, int):
        return turn
    key = (str(turn.get("conversation_id")), number)
    steps = shown.steps.get(key)
    if not steps:
        return turn
    out = dict(turn)
    out["steps"] = [{**s, "text": step_text(s)} for s in steps]
    if isinstance(out.get("reply"), str):
        out["reply"] = break_after_steps(out["reply"], shown.breaks.get(key, []))
    return out


def break_after_steps(reply: str, breaks: Sequence[int]) -> str:
    """``reply`` with the words after each tool step starting a paragraph, as the live page shows them.

    ``breaks`` are character offsets into the reply (where a step came); offsets past
    the shown part (a long reply is cut) are ignored.
    """
    if not breaks or not reply:
        return reply
    parts: list[str] = []
    last = 0
    for at in breaks:
        if at <= last or at >= len(reply):
            continue
        parts.append(reply[last:at])
        last = at
    if not parts:
        return reply
    parts.append(reply[last:])
    text = parts[0]
    for part in parts[1:]:
        if not text.endswith("\n\n"):
            text += "\n" if text.endswith("\n") else "\n\n"
        text += part
    return text
