"""``session/load`` replay: the loaded session's recorded history, sent to the ACP client before the answer.

ACP: an agent that offers ``loadSession`` streams the whole conversation back
as ``session/update`` notifications before it answers ``session/load``.  The
bridge reads what it recorded for the client session (thread ``acp-<id>``)
from the thread store's ``thread_events`` (the events, in order, a page at a
time) and lets the outer codec's ``replay`` turn them into updates.  Nothing
recorded (or no database) replays nothing; a read that fails or takes too long
stops the replay there: the load is answered either way.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from .events import Event, from_json
from .threads import AsyncClosable, ThreadHistory

__all__ = ["replay_history"]

_REPLAY_BOUND = 30.0  # the whole read; the load's answer never waits on the database longer
_PAGE = 1000  # events per read: memory stays bounded however long the history is
_CLOSE_BOUND = 10.0


def _events(page: Sequence[Mapping[str, Any]]) -> list[Event]:
    out = []
    for envelope in page:
        data = envelope.get("event")
        if not isinstance(data, Mapping):
            continue
        try:
            out.append(from_json(data))
        except Exception:  # an event type this process does not know (another plugin's): not replayed
            continue
    return out


async def replay_history(
    open_store: Callable[[], Any],
    thread: str,
    replay: Callable[[list[Event]], Sequence[Mapping[str, Any]]],
    send: Callable[[Sequence[Mapping[str, Any]]], Awaitable[None]],
) -> int:
    """Send ``replay(events)`` for every page of ``thread``'s recorded events, in order; the events read.

    ``open_store()`` gives the thread store (``None``, or one without ``thread_events``: nothing
    to replay); it is closed here.
    """
    store, count = None, 0
    try:
        store = open_store()
        if not isinstance(store, ThreadHistory):
            return 0
        read = store.thread_events
        with trio.move_on_after(_REPLAY_BOUND) as scope:
            after = 0
            while True:
                page, after = await read(thread, after=after, limit=_PAGE)
                if not page:
                    break
                events = _events(page)
                count += len(page)
                await send(replay(events))
        if scope.cancelled_caught:
            print(f"agentrt bridge: note: the history of {thread} was replayed only in part (the database was slow)",
                  file=sys.stderr, flush=True)  # fmt: skip
    except Exception as exc:  # no usable database: the load is answered without (the rest of) its history
        print(f"agentrt bridge: note: the history of {thread} could not be read ({type(exc).__name__})",
              file=sys.stderr, flush=True)  # fmt: skip
    finally:
        if isinstance(store, AsyncClosable):
            with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_BOUND):
                await store.aclose()
    return count
