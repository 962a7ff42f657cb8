"""A conversation: the turn rules and the fan-out around one engine.

The process (spawn and respawn with ``--resume``, its read loop and parking,
the first-output watch, raw taps, the bounded stop, its end) is the engine's,
:class:`agentrt._engine.HostedProcess`, whose owner is the conversation's
:class:`agentrt._conversation_owner.ConversationOwner` (each process's spec,
codec and probe; what its output and its end mean for the live turn); the
rules (:class:`agentrt._turn_rules.TurnRules`), early ends
(:mod:`agentrt._cancel`), control answers (:mod:`agentrt._control`) and the
sinks (:class:`agentrt._fanout.Fanout`) each live in their own module.

What stays here: sending one turn (encoded once, one stdin write attempt per
send, never replayed), cancelling and closing.  Everything decoded from one stdout chunk travels as
one :class:`~agentrt.events.EventBatch`.  The agent exiting before the
terminal event fails the turn with ``exit_before_result``, at the latest
:data:`EXIT_OUTPUT_GRACE` after the exit even if a grandchild still holds
stdout open (its process group is then killed).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal

import trio

from ._cancel import end_turn as _end_turn
from ._control import answer_control
from ._conversation_owner import ConversationOwner
from ._engine import HostedProcess
from ._exceptions import collapse_single_group
from ._fanout import CLOSE_TIMEOUT, MAX_SINK_FAILURES, Fanout
from ._launch import LaunchSpec, is_valid_session_id
from ._mismatch import first_output_timeout as _first_output_from_env
from ._process import AgentProcess, ExitStatus
from ._pump import EXIT_OUTPUT_GRACE
from ._tap import TapSource
from ._turn_rules import TurnRules
from ._turn_stream import TurnState, TurnStream
from .dialect import Dialect, Turn, content_text
from .errors import RUNTIME_FAILURE_CODES, AgentrtError
from .events import ControlRequest, Event, EventBatch, TurnCompleted, TurnFailed, TurnStarted
from .permissions import PermissionPolicy

if TYPE_CHECKING:
    from ._plugins import Plugins
    from .sinks import Sink

__all__ = [
    "Conversation",
    "TurnStream",
    "open_conversation",
    "RUNTIME_FAILURE_CODES",
    "EXIT_OUTPUT_GRACE",
    "MAX_SINK_FAILURES",
]


class Conversation:
    """Turns over one live agent process (respawned with ``--resume`` when needed).

    Create it with :func:`open_conversation`.  The turn rules and the fan-out
    live here; the process, its read loop and its end live in its engine
    (:class:`~agentrt.lowlevel.HostedProcess`).
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
        self._seq = 0
        self._internal_events: list[Event] = []
        self._fanout = Fanout(nursery, on_failure=self._internal_events.append, close_timeout=CLOSE_TIMEOUT)
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
        self._fanout.attach(sink)
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
        return self._fanout.failures

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
        await _end_turn(state, self._engine, self._fail, code=code, message=message, interrupt=interrupt)
        return True

    async def _end_state(self, state: TurnState) -> None:
        # A TurnStream closed before its turn ended.
        await _end_turn(state, self._engine, self._fail)

    async def stop(self) -> ExitStatus | None:
        """Stop the agent process (idempotent, bounded); returns how it ended.

        Later sends fail with ``session_exited``.
        """
        return await self._engine.close()

    # -- turn rules and fan-out ---------------------------------------------
    async def _dispatch(self, events: Sequence[Event]) -> None:
        state = self._turn
        out, for_turn, controls = self._rules.apply(events)
        if self._internal_events:
            # A new list: `out` may be the very list handed to the turn's consumer.
            out = out + self._internal_events
            self._internal_events.clear()
        if not out:
            return
        batch = EventBatch(
            source=self.id, first_seq=self._seq, mono=trio.current_time(), wall=time.time(), events=tuple(out)
        )
        self._seq += len(out)
        if state is not None and for_turn:
            state.send.send_nowait(for_turn)
            if state.progress.terminal is not None:
                state.ended.set()
                state.send.close()
                if self._turn is state:
                    self._turn = None
        await self._fanout.send(batch)
        for req in controls:
            self._nursery.start_soon(self._answer_control, req)

    async def _fail(self, code: str, message: str) -> None:
        # Ends the turn in flight, if any, with this failure.
        await self._dispatch(self._rules.fail_current(code, message))

    async def _answer_control(self, req: ControlRequest) -> None:
        proc, codec = self._engine.process, self._engine.codec
        if proc is None or codec is None:
            return
        await answer_control(req, codec=codec, policy=self._policy, send=proc.send, report=self._internal_events.append)

    async def _begin_turn(self, turn: Turn) -> TurnState:
        if self._send_lock is None:
            self._send_lock = trio.Lock()
        async with self._send_lock:
            previous = self._turn
            if previous is not None and previous.progress.terminal is None:
                if previous.waiting:
                    raise AgentrtError("turn_in_progress", "the previous turn has not ended")
                # Abandoned (its stream left unclosed): end it as closing it would have.
                await _end_turn(previous, self._engine, self._fail)
            engine = self._engine
            resume = self._rules.session_id or self._resume
            codec = engine.next_codec(resume)
            data = codec.encode_turn(turn)  # once; refuses unsupported blocks before any write
            self._turns += 1
            state = TurnState(self._rules.begin_turn(self._turns))
            self._turn = state
            try:
                await self._dispatch([TurnStarted(turn=self._turns, prompt=content_text(turn))])
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
                await self._dispatch(self._rules.fail_current(exc.code, exc.detail or exc.code))
            except trio.Cancelled:
                # The caller's scope was cancelled while the turn was being started: it still ends, once.
                with trio.CancelScope(shield=True):
                    if state.proc is not None and state.progress.live:
                        self._engine.replace_process()  # the write may have been cut short
                    await self._dispatch(self._rules.fail_current("turn_cancelled", "the turn was cancelled"))
                raise
            return state

    # -- shutdown ------------------------------------------------------------
    async def _aclose(self) -> None:
        # One deadline for the whole close (CLOSE_TIMEOUT): the agent's stop is
        # bounded by its own escalation (about 4 s by default), the sinks get the rest.
        deadline = trio.current_time() + CLOSE_TIMEOUT
        with trio.CancelScope(shield=True):
            await self.stop()
            with trio.move_on_at(deadline):
                # Whatever the pump could not deliver is lost only if a sink hangs past the deadline.
                if self._internal_events:
                    await self._dispatch([])
            await self._fanout.aclose(deadline=deadline)


@asynccontextmanager
async def open_conversation(
    launch: LaunchSpec | None = None,
    *,
    plugins: Plugins | None = None,
    resume: str | None = None,
    sinks: Sequence[Sink] = (),
    cwd: str | None = None,
    parent_env: Mapping[str, str] | None = None,
    conversation_id: str | None = None,
    permission_policy: PermissionPolicy | None = None,
    dialect: Dialect | None = None,
    term_grace: float | None = None,
    first_output_timeout: float | Literal["env"] | None = "env",
) -> AsyncIterator[Conversation]:
    """Open a conversation with the agent CLI that ``launch`` names.

    ``launch`` defaults to the launch contract read from the environment
    (``AWP_AGENT_CLI_*``).  The process starts here, so launch and spawn
    errors (``spawn_failed``) are raised on entry.  If the process exits, the
    next send starts a new one, resuming the native session when the agent
    reported a valid id.  ``term_grace`` overrides how long a stopping agent
    has between SIGTERM and SIGKILL.  ``first_output_timeout`` bounds how long
    a new process has after the prompt to write a line its dialect recognises
    before the turn fails ``protocol_mismatch`` (``None``: no bound; by
    default ``AGENTRT_FIRST_OUTPUT_TIMEOUT`` of ``parent_env``, else 30 s).  Leaving the block (normally, by
    exception or by cancellation of the caller's scope) stops the agent and
    flushes the sinks, shielded and bounded.

    Example::

        async with open_conversation(LaunchSpec(executable="/usr/local/bin/my-agent")) as conv:
            async for event in conv.send("hello"):
                print(event)
    """
    env = dict(os.environ) if parent_env is None else dict(parent_env)
    if launch is None:
        launch = LaunchSpec.from_env(env)
    if resume is not None and not is_valid_session_id(resume):
        raise AgentrtError("invalid_resume_session_id", "resume id must match [A-Za-z0-9._:-]{1,256}")
    first_output = _first_output_from_env(env) if first_output_timeout == "env" else first_output_timeout
    if plugins is None and (dialect is None or permission_policy is None):
        from ._plugins import get_plugins

        plugins = get_plugins()
    if dialect is None:
        assert plugins is not None
        dialect = plugins.dialect(launch.protocol)
    if permission_policy is None:
        assert plugins is not None
        permission_policy = plugins.permission_policy()
    # The nursery only runs our background tasks: an error from the body or from
    # spawning is the caller's one exception, not a group to unpack.
    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            conv = Conversation(
                nursery=nursery,
                launch=launch,
                dialect=dialect,
                permission_policy=permission_policy,
                cwd=cwd,
                parent_env=env,
                conversation_id=conversation_id or str(uuid.uuid4()),
                resume=resume,
                term_grace=term_grace,
                first_output=first_output,
            )
            for sink in sinks:
                await conv.attach(sink)
            try:
                # Spawn now, not at the first send: output before the first input is
                # then visible as such, and a spawn failure surfaces here.
                await conv._engine.ensure(resume)
                yield conv
            finally:
                await conv._aclose()
                nursery.cancel_scope.cancel()
