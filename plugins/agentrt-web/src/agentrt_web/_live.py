"""One open thread of the web UI: its agent conversation, and who may start or stop a turn on it.

A turn is claimed (``busy``) before anything waits, so a second message meanwhile is
``turn_in_progress``.  Every turn gets a key; a Stop names the key of the turn it was pressed
for, so one that arrives after that turn ended never touches a later turn, and the Stops of one
turn coalesce into one request to the runtime (``Conversation.cancel_turn``), run in the server's
nursery so that a dropped request does not cut it short.  The next turn waits for a Stop still
under way (bounded): nothing that Stop does can reach the process the next turn runs on.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from typing import Any

import attrs
import trio

from agentrt.errors import AgentrtError

from ._agents import ThreadAgent
from ._websink import WebSink

__all__ = ["LiveThread"]

# How long a message waits for the previous turn's task to notice its end.
IDLE_GRACE = 1.0
# How long a message waits for a Stop of the previous turn to finish (the runtime bounds the stop
# itself: the agent's grace, then the bounded stop of its process group).
CANCEL_SETTLE = 30.0
# How long a message waits for its turn to be under way before it is answered.
START_WAIT = 5.0


@attrs.define(eq=False)
class LiveThread:
    """An open thread: its sinks, its conversation (``conv``) and the state of its turns."""

    name: str
    sink: WebSink
    conv: Any = None
    closing: trio.Event = attrs.Factory(trio.Event)
    closed: trio.Event = attrs.Factory(trio.Event)
    busy: bool = False
    idle: trio.Event = attrs.Factory(trio.Event)
    last_prompt: str = ""
    db_sink: Any = None
    #: The agent the thread talks to (its own, else the server's default).
    agent: ThreadAgent | None = None
    #: The key of the turn in flight (or last run): a Stop names the turn it was issued for.
    turn_key: str = ""
    #: The turn a Stop is (or was) under way for, and when it is over.
    cancel_key: str = ""
    cancelled: trio.Event | None = None

    async def start(self, text: str, nursery: trio.Nursery, run: Callable[..., Any]) -> str:
        """Run ``run(self, text, started)`` as this thread's next turn in ``nursery``; returns the turn's key.

        ``turn_in_progress`` if the previous turn has not ended (after a short grace).
        """
        if self.busy:
            # The page may have shown the terminal a moment before the turn's task saw it.
            with trio.move_on_after(IDLE_GRACE):
                await self.idle.wait()
        if self.busy:
            raise AgentrtError("turn_in_progress", "the previous turn has not ended")
        self.busy = True  # claimed before any wait
        self.idle = trio.Event()
        if self.cancelled is not None:
            with trio.move_on_after(CANCEL_SETTLE):
                await self.cancelled.wait()
        key = secrets.token_urlsafe(9)
        self.turn_key = self.sink.turn_key = key
        self.last_prompt = text
        started = trio.Event()
        nursery.start_soon(run, self, text, started)
        with trio.move_on_after(START_WAIT):
            await started.wait()
        return key

    def ended(self) -> None:
        """The turn is over: the next message may go."""
        self.busy = False
        self.idle.set()

    async def stop(self, key: str | None, nursery: trio.Nursery) -> bool:
        """Stop the turn in flight (of ``key``, when given); ``False`` if there is none to stop."""
        if self.conv is None or not self.busy or (key is not None and key != self.turn_key):
            return False
        if self.cancel_key != self.turn_key or self.cancelled is None:
            self.cancel_key = self.turn_key
            done = self.cancelled = trio.Event()
            nursery.start_soon(self._cancel, done)
        with trio.move_on_after(CANCEL_SETTLE):  # the runtime bounds the stop; this bounds the answer
            await self.cancelled.wait()
        return True

    async def _cancel(self, done: trio.Event) -> None:
        try:
            if self.conv is not None:
                await self.conv.cancel_turn()
        except Exception as exc:  # a broken stop must not take the server down
            print(f"agentrt web: thread {self.name!r}: stop failed: {type(exc).__name__}", file=sys.stderr)
        finally:
            done.set()
