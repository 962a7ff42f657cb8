"""A conversation: turns over one engine, and the stream each turn is read through.

:class:`Conversation` sends turns (encoded once, one stdin write attempt per
send, never replayed), cancels them and closes; :class:`TurnStream` is one
turn's events as its caller reads them.  A prompt's whole way to the agent's
stdin is in this file, the engine's (:mod:`agentrt._engine`), the process's
(:mod:`agentrt._process`) and the dialect's codec.

The process (spawn and respawn with ``--resume``, its read loop and parking,
the first-output watch, raw taps, the bounded stop, its end) is the engine's,
:class:`agentrt._engine.HostedProcess`, whose owner is the conversation's
:class:`agentrt._turns.ConversationOwner`: each process's spec,
codec and probe, and everything that comes back (the turn rules, the
fan-out, what the process's end means for the live turn).  Early ends are
:mod:`agentrt._turn_end`'s; :func:`open_conversation` lives in
:mod:`agentrt._conversation_open` and is re-exported here.  Everything decoded
from one stdout chunk travels as one :class:`~agentrt.events.EventBatch`.  The
agent exiting before the terminal event fails the turn with
``exit_before_result``, at the latest :data:`EXIT_OUTPUT_GRACE` after the exit
even if a grandchild still holds stdout open (its process group is then
killed).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import trio

from ._conversation_open import open_conversation
from ._engine import HostedProcess
from ._fanout import CLOSE_TIMEOUT, MAX_SINK_FAILURES
from ._launch import LaunchSpec
from ._process import AgentProcess, ExitStatus
from ._tap import TapSource
from ._turn_end import end_turn as _end_turn
from ._turns import ConversationOwner, TurnProgress, TurnRules
from ._wire import EXIT_OUTPUT_GRACE
from .dialect import Dialect, Turn, content_text
from .errors import RUNTIME_FAILURE_CODES, AgentrtError
from .events import Event, TurnCompleted, TurnFailed, TurnStarted
from .permissions import PermissionPolicy

if TYPE_CHECKING:
    from .sinks import Sink

__all__ = [
    "Conversation",
    "TurnState",
    "TurnStream",
    "open_conversation",
    "RUNTIME_FAILURE_CODES",
    "EXIT_OUTPUT_GRACE",
    "MAX_SINK_FAILURES",
]


class Conversation:
    """Turns over one live agent process (respawned with ``--resume`` when needed).

    Create it with :func:`open_conversation`.  The process, its read loop and
    its end live in its engine (:class:`~agentrt.lowlevel.HostedProcess`);
    what comes back from it goes through the turn rules and the fan-out of
    its owner.
    """

    def __init__(
        self,
        *,
        nursery: trio.Nursery,
        launch: LaunchSpec,
        dialect: Dialect,
        permission_policy: PermissionPolicy,
        cwd: str | None,
        parent_env: Mapping[str, str],
        conversation_id: str,
        resume: str | None,
        term_grace: float | None = None,
        first_output: float | None = None,
    ) -> None:
        self.id = conversation_id
        self.launch = launch
        self.dialect = dialect
        self._nursery = nursery
        self._policy = permission_policy
        self._resume = resume
        self._rules = TurnRules(model=launch.model)
        self._turn: TurnState | None = None
        self._turns = 0
        self._owner = owner = ConversationOwner(
            self, cwd=cwd, parent_env=parent_env, term_grace=term_grace, first_output=first_output
        )
        self._engine = HostedProcess(owner, nursery=nursery)
        # Made on first use: a thousand idle conversations need none.
        self._send_lock: trio.Lock | None = None

    # -- public API ------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        """The agent's native session id, once it reported a valid one."""
        return self._rules.session_id

    @property
    def model(self) -> str | None:
        """The model the agent reported (else the launch model)."""
        return self._rules.model

    def send(self, prompt: str | Turn) -> TurnStream:
        """Send one user turn; iterate the result for its events.

        The turn is written (exactly once) when iteration starts.  A previous
        turn that has not ended but that nobody is reading (its stream was
        left by ``break``, an exception or a cancelled scope) is ended first,
        as :meth:`cancel_turn` would; ``turn_in_progress`` is raised only while
        another task is waiting on it.  ``unsupported_content_block`` is raised
        before writing anything the dialect cannot carry.  The stream is an
        async context manager: leaving it ends the turn if it has not ended.
        """
        turn = Turn.text(prompt) if isinstance(prompt, str) else prompt
        return TurnStream(self._begin_turn, turn, self._end_state)

    async def ask(self, prompt: str | Turn) -> TurnCompleted | TurnFailed:
        """Send a turn and wait for its terminal event (events still reach the sinks)."""
        return await self.send(prompt).result()

    async def attach(self, sink: Sink) -> None:
        """Fan every later batch out to ``sink`` (in its own task).

        A sink that is also a :class:`~agentrt.lowlevel.TapSource` is asked for a
        raw tap for every agent process spawned from now on.
        """
        self._owner.fanout.attach(sink)
        if isinstance(sink, TapSource):
            self._owner.tap_sources += (sink,)

    @property
    def exit_status(self) -> ExitStatus | None:
        """How the last process ended, once it has."""
        return self._engine.exit_status

    @property
    def sink_failures(self) -> dict[str, int]:
        """Attached sinks that failed at least once: name → failed batches (closing included).

        Some events then never reached that sink; ``agentrt run`` exits non-zero.
        """
        return self._owner.fanout.failures

    @property
    def process(self) -> AgentProcess | None:
        """The live agent process, if any."""
        return self._engine.process

    async def cancel_turn(self) -> None:
        """End the current turn with ``turn_cancelled``; the conversation stays usable.

        Dialects that can interrupt (:class:`~agentrt.dialect.Interruptible`) are
        asked to, and the agent has :data:`~agentrt.lowlevel.CANCEL_GRACE` seconds
        to end the turn itself; otherwise, or then, the process gets the bounded
        stop and the next send starts a new one with ``--resume`` (when a session
        id is known).  A second call while the first still waits kills the
        process group at once.  Returns once the turn has its one terminal event.
        """
        await self.end_turn()

    async def end_turn(
        self, *, code: str = "turn_cancelled", message: str = "the turn was cancelled", interrupt: bool = True
    ) -> bool:
        """End the current turn early with ``code`` (as :meth:`cancel_turn`); False when no turn is live.

        ``interrupt=False`` skips the dialect's interrupt: the process is stopped
        straight away (``agentrt run --timeout`` ends a turn with ``turn_timeout`` so).
        """
        state = self._turn
        if state is None or state.progress.terminal is not None:
            return False
        await _end_turn(state, self._engine, self._owner.fail, code=code, message=message, interrupt=interrupt)
        return True

    async def _end_state(self, state: TurnState) -> None:
        # A TurnStream closed before its turn ended.
        await _end_turn(state, self._engine, self._owner.fail)

    async def stop(self) -> ExitStatus | None:
        """Stop the agent process (idempotent, bounded); returns how it ended.

        Later sends fail with ``session_exited``.
        """
        return await self._engine.close()

    async def _begin_turn(self, turn: Turn) -> TurnState:
        if self._send_lock is None:
            self._send_lock = trio.Lock()
        async with self._send_lock:
            previous = self._turn
            if previous is not None and previous.progress.terminal is None:
                if previous.waiting:
                    raise AgentrtError("turn_in_progress", "the previous turn has not ended")
                # Abandoned (its stream left unclosed): end it as closing it would have.
                await _end_turn(previous, self._engine, self._owner.fail)
            engine, dispatch = self._engine, self._owner.on_events
            resume = self._rules.session_id or self._resume
            codec = engine.next_codec(resume)
            data = codec.encode_turn(turn)  # once; refuses unsupported blocks before any write
            self._turns += 1
            state = TurnState(self._rules.begin_turn(self._turns))
            self._turn = state
            try:
                await dispatch([TurnStarted(turn=self._turns, prompt=content_text(turn))])
                proc = await engine.ensure(resume)
                if state.progress.terminal is not None:
                    return state  # ended (cancelled) while the process started: nothing is written
                if engine.codec is not codec:
                    # Only when the process ended between the encoding and now: its successor speaks afresh.
                    data = engine.codec.encode_turn(turn) if engine.codec is not None else data
                self._rules.input_sent()
                state.proc = proc
                # The one write attempt of this send; then the agent has the first-output bound to answer.
                await engine.send(data, waiting=lambda: state.progress.live and state.proc is proc)
            except AgentrtError as exc:
                await dispatch(self._rules.fail_current(exc.code, exc.detail or exc.code))
            except trio.Cancelled:
                # The caller's scope was cancelled while the turn was being started: it still ends, once.
                with trio.CancelScope(shield=True):
                    if state.proc is not None and state.progress.live:
                        self._engine.replace_process()  # the write may have been cut short
                    await dispatch(self._rules.fail_current("turn_cancelled", "the turn was cancelled"))
                raise
            return state

    # -- shutdown ------------------------------------------------------------
    async def _aclose(self) -> None:
        # One deadline for the whole close (CLOSE_TIMEOUT): the agent's stop is
        # bounded by its own escalation (about 4 s by default), the sinks get the rest.
        deadline = trio.current_time() + CLOSE_TIMEOUT
        with trio.CancelScope(shield=True):
            await self.stop()
            await self._owner.close_sinks(deadline)


class TurnState:
    """The I/O side of one turn: where its events go, and when it ended."""

    def __init__(self, progress: TurnProgress) -> None:
        self.progress = progress
        self.send, self.recv = trio.open_memory_channel[Sequence[Event]](math.inf)
        self.ended = trio.Event()
        # The process this turn was written to: only its exit can end the turn.
        self.proc: object | None = None
        #: Tasks waiting for this turn's next events right now (its stream is being read).
        self.waiting = 0
        #: The wait for the agent's own answer to an interrupt, while there is one (agentrt._turn_end).
        self.cut_short: trio.CancelScope | None = None


class TurnStream:
    """The events of one turn, ending with its terminal event.

    Iterating writes the turn (once) and yields events as they arrive::

        async for event in conv.send("hello"):
            ...

    ``await stream.result()`` drains it and returns the terminal event.

    A stream is closable, like httpx's streaming responses: ``await
    stream.aclose()``, or leaving ``async with conv.send(...) as stream:``,
    ends a turn that has not ended exactly as
    :meth:`~agentrt.Conversation.cancel_turn` does (the dialect's interrupt
    where it has one, then the bounded stop; one ``turn_cancelled``); the
    conversation stays usable.  Closing is shielded and bounded; after it,
    iteration ends and :attr:`terminal` holds the turn's terminal event.
    Closing a stream that was never iterated writes nothing.
    """

    def __init__(
        self,
        begin: Callable[[Turn], Awaitable[TurnState]],
        turn: Turn,
        end: Callable[[TurnState], Awaitable[None]] | None = None,
    ) -> None:
        self._begin = begin
        self._end = end
        self._turn = turn
        self._state: TurnState | None = None
        self._buffer: list[Event] = []
        self._pos = 0
        self._done = False
        self._closed = False
        #: The terminal event, once the turn has ended (and been read, or the stream closed).
        self.terminal: TurnCompleted | TurnFailed | None = None

    def __aiter__(self) -> TurnStream:
        return self

    async def __aenter__(self) -> TurnStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _receive(self, state: TurnState) -> Sequence[Event]:
        state.waiting += 1
        try:
            return await state.recv.receive()
        finally:
            state.waiting -= 1

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        state = self._state
        if state is None:  # the first iteration writes the turn
            state = self._state = await self._begin(self._turn)
        while self._pos >= len(self._buffer):
            if self._done:
                raise StopAsyncIteration
            try:
                batch = await self._receive(state)
            except trio.EndOfChannel:
                self._done = True
                raise StopAsyncIteration from None
            self._buffer = list(batch)
            self._pos = 0
        ev = self._buffer[self._pos]
        self._pos += 1
        if isinstance(ev, (TurnCompleted, TurnFailed)):
            self.terminal = ev
            self._done = True
        return ev

    async def batches(self) -> AsyncIterator[Sequence[Event]]:
        """The turn's events a received chunk at a time (cheaper than one at a time).

        Each item is the events one stdout read produced, in order; the last
        item ends with the terminal event.  Use either this or plain iteration
        on one stream, not both.
        """
        if self._closed:
            return
        state = self._state
        if state is None:
            state = self._state = await self._begin(self._turn)
        if self._pos < len(self._buffer):
            # What plain iteration had received but not returned yet; it may end the turn.
            rest = self._buffer[self._pos :]
            self._pos = len(self._buffer)
            if isinstance(rest[-1], (TurnCompleted, TurnFailed)):
                self.terminal = rest[-1]
                self._done = True
            yield rest
        while not self._done and not self._closed:
            try:
                batch = await self._receive(state)
            except trio.EndOfChannel:
                self._done = True
                return
            last = batch[-1] if batch else None
            if isinstance(last, (TurnCompleted, TurnFailed)):
                self.terminal = last
                self._done = True
            yield batch

    async def result(self) -> TurnCompleted | TurnFailed:
        """Consume the rest of the turn and return its terminal event."""
        # A received chunk at a time: draining event by event costs a
        # coroutine step per event for nothing.
        async for _ in self.batches():
            pass
        assert self.terminal is not None
        return self.terminal

    async def aclose(self) -> None:
        """End the turn if it has not ended (as ``cancel_turn()`` does); idempotent, shielded, bounded.

        The bound is the cancel's: :data:`~agentrt.lowlevel.CANCEL_GRACE` for the
        agent's own answer to an interrupt, then the process's bounded stop.
        """
        if self._closed:
            return
        self._closed = True
        state = self._state
        if state is None:
            return  # never started: nothing was written
        if state.progress.terminal is None and self._end is not None:
            with trio.CancelScope(shield=True):
                await self._end(state)
        self._done = True
        if self.terminal is None:
            self.terminal = state.progress.terminal
