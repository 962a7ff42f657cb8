"""The bridge's hosted conversation, per client session: opened, reopened to resume, and recorded.

One task owns the conversation (trio wants a nursery left by the task that
entered it), so every switch is ordered with the turns around it: the reader
queues turns and :class:`SessionSwitch` items on one channel.

* A new client session after turns have run gets a fresh conversation (a new
  process); before any turn it takes over the one already open, unless it
  names another working directory.
* The hosted CLI runs in the client session's ``cwd`` (``session/new`` and
  ``session/load`` name it): a session in another directory than the running
  conversation's reopens it there before any of its turns runs.  Without
  client sessions (stream-json outside) it runs in the bridge's own.
* ``session/load`` reopens the conversation resuming the hosted CLI's native
  session: the one this process saw for that client session, else the one the
  database recorded for it (thread ``acp-<id>``), else the id itself (a client
  may load the hosted CLI's own session id).  The load is answered once the
  new conversation is open, with the reason when it could not be.
* A model or mode the client picks reopens it with that setting, resuming the
  session it had (the hosted CLI takes both at start: ``--model``,
  ``--permission-mode``, or in band) -- unless the bridge forwards switches to
  the hosted agent (``forward``: a hosted ACP agent switches in place).
* With ``prepare`` (a hosted ACP agent), a ``new`` or ``load`` is answered only
  once ``prepare`` has had the hosted agent open its own session; when it
  cannot, the client gets the reason and the bridge goes on in a fresh
  conversation.
* Each conversation is recorded (the ``recorder`` sink, as ``agentrt run``
  does), a client session's conversations under thread ``acp-<id>``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio

from .errors import AgentrtError
from .threads import AsyncClosable, ThreadStore

__all__ = ["HostedConversation", "SessionSwitch", "session_thread"]

_LOOKUP_BOUND = 10.0  # the database's answer to "which native session is this client session?"


def session_thread(client_session: str) -> str:
    """The thread a client session's conversations are recorded under."""
    return f"acp-{client_session}"


@attrs.frozen
class SessionSwitch:
    """A client session opened (``new``), loaded (``load``), or given a ``model`` or ``mode``.

    All but ``new`` are answered through ``request_id`` once done.  ``cwd`` is the
    working directory a ``new`` or ``load`` names (absolute; ``None``: unchanged).
    """

    kind: str
    request_id: Any
    client_session: str
    model: str | None = None
    mode: str | None = None
    cwd: str | None = None
    option: tuple[Any, Any] | None = None
    """``(config id, value)`` of an ``option`` switch (a hosted agent's config option)."""


OpenConversation = Callable[[str | None, str | None, str | None, str | None], AbstractAsyncContextManager[Any]]
"""``(resume, model, mode, cwd)`` → the conversation's context manager (``None``: the launch's own;
``cwd`` ``None``: the bridge's own working directory)."""


class HostedConversation:
    """Owns the conversation the bridge's turns run in (see the module docstring)."""

    def __init__(
        self,
        open_conversation: OpenConversation,
        *,
        resume: str | None,
        store: Callable[[], ThreadStore | None],
        record: Callable[[Any, str | None], Awaitable[None]],
        answer: Callable[[SessionSwitch, str | None], Awaitable[None]],
        sessions: bool,
        prepare: Callable[[Any, SessionSwitch], Awaitable[None]] | None = None,
        forward: Callable[[Any, SessionSwitch], Awaitable[None]] | None = None,
    ) -> None:
        self._open = open_conversation
        self._resume = resume
        self._store = store
        self._record = record
        self._answer = answer
        self._sessions = sessions  # the outer dialect has client sessions (ACP)
        self._prepare = prepare  # opens the hosted agent's session before a new or load is answered
        self._forward = forward  # switches the hosted agent in place (answers the client itself)
        #: The conversation turns run in now (``None`` between two).
        self.conv: Any = None
        #: Why the first conversation could not be opened (the bridge's startup error).
        self.startup_error: AgentrtError | None = None
        self._native: dict[str, str] = {}  # client session -> the hosted CLI's session id
        self._client: str | None = None  # the client session the conversation serves
        self._ran = False  # a turn has run in the conversation
        self._model: str | None = None  # a model the client chose (else the launch's)
        self._mode: str | None = None  # a mode the client chose (else the CLI's default)
        self._cwd: str | None = None  # the client session's working directory (else the bridge's)

    async def run(
        self,
        items: trio.MemoryReceiveChannel[Any],
        run_turn: Callable[[Any, Any], Awaitable[None]],
        *,
        task_status: trio.TaskStatus[bool] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve ``items`` (turns for ``run_turn``, and switches) until the channel closes.

        ``task_status`` gets ``True`` once the first conversation is open, ``False``
        when it could not be (:attr:`startup_error` says why).
        """
        resume, switch, started = self._resume, None, False
        while True:
            current = None  # the hosted CLI's session when the conversation closed
            try:
                async with self._open(resume, self._model, self._mode, self._cwd) as conv:
                    self.conv, self._ran = conv, False
                    if not started:
                        started = True
                        task_status.started(True)
                    if not self._sessions:
                        await self._record(conv, None)
                    if switch is not None:
                        await self._bind(conv, switch)
                    switch = None
                    async for item in items:
                        if not isinstance(item, SessionSwitch):
                            await run_turn(conv, item)
                            self._ran = True
                            if self._client is not None and conv.session_id:
                                self._native[self._client] = conv.session_id
                        elif item.kind == "new" and not self._ran and not self._moves(item.cwd):
                            switch = item  # a failure is answered, and the bridge goes on afresh
                            await self._bind(conv, item)
                            switch = None
                        elif item.kind not in ("new", "load") and self._forward is not None:
                            await self._forward(conv, item)
                        else:
                            switch = item
                            current = conv.session_id
                            break
                    else:
                        return
            except AgentrtError as exc:
                if not started:
                    self.startup_error = exc
                    task_status.started(False)
                    return
                if switch is None:
                    raise
                # The session could not be resumed: say why, and go on in a fresh conversation.
                await self._answer(switch, f"{exc.code}: {exc.detail}" if exc.detail else exc.code)
                resume, switch = None, None
                continue
            finally:
                self.conv = None
            if switch.cwd is not None:  # the session's turns run there (its tools act there)
                self._cwd = switch.cwd
            if switch.kind == "load":
                resume = await self._native_id(switch.client_session)
            elif switch.model is not None or switch.mode is not None:
                resume = current or resume  # the same session, restarted with the new setting
                self._model = switch.model or self._model
                self._mode = switch.mode or self._mode
            else:
                resume = None

    @property
    def thread(self) -> str | None:
        """The thread the running conversation is recorded under (``None``: none, outside client sessions)."""
        return session_thread(self._client) if self._client is not None else None

    def _moves(self, cwd: str | None) -> bool:
        """True when ``cwd`` is another directory than the running conversation's."""
        if cwd is None:
            return False
        try:
            return cwd != (self._cwd or os.getcwd())
        except OSError:  # the bridge's own directory is gone: the session's is another
            return True

    async def _bind(self, conv: Any, switch: SessionSwitch) -> None:
        if self._prepare is not None:
            await self._prepare(conv, switch)
        self._client = switch.client_session
        await self._record(conv, session_thread(switch.client_session))
        if switch.kind != "new" or switch.request_id is not None:
            await self._answer(switch, None)

    async def _native_id(self, client_session: str) -> str:
        known = self._native.get(client_session)
        if known:
            return known
        store = self._store()
        if store is not None:
            try:
                with trio.move_on_after(_LOOKUP_BOUND):
                    record = await store.get_thread(session_thread(client_session))
                    if record is not None and record.session_id:
                        return str(record.session_id)
            except AgentrtError:
                pass  # no usable database: the id itself is the last guess
            finally:
                if isinstance(store, AsyncClosable):
                    with trio.CancelScope(shield=True), trio.move_on_after(_LOOKUP_BOUND):
                        await store.aclose()
        return client_session
