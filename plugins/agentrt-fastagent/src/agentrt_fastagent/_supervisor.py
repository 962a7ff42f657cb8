"""The bot supervisor: desired state, the lifecycle state machine, restarts.

One :class:`Supervisor` runs inside :func:`open_supervisor`'s nursery.  Each
bot with ``desired_state == "running"`` gets one task that spawns FastAgent
(after a managed-skills sync), reads its stdout through the core's read loop
(:func:`agentrt.lowlevel.pump_events`) and the ``fastagent`` dialect, and
applies each event to the bot's record in order (the event → state rules of
the reference supervisor, pure functions in ``_transitions``).  A reconciler loop
(bounded interval, woken early by requests and by backoff expiry) starts and
stops processes so that they match what the store asks for.  Because it only
reads the desired state from the store, any process sharing the store (the
``agentrt bots`` CLI) controls a running supervisor.

Requested stop versus crash is decided only by the record: a ``stopped`` event
(or an exit without one) while ``desired_state`` is ``stopped`` or the status
is ``stopping`` is a stop; anything else is a crash, which schedules a restart
after a backoff, and the ``max_restarts``-th consecutive crash marks the bot
``failed`` until a user asks for a restart.  Every state change the supervisor
initiates sets ``stopping`` *before* it signals, so its own stops are never
counted as crashes.
"""

from __future__ import annotations

import fcntl
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from agentrt.bots import AtomicBotStore, BotRecord, BotStore
from agentrt.errors import AgentrtError
from agentrt.events import Event, EventBatch, StateChanged
from agentrt.lowlevel import Fanout, collapse_single_group
from agentrt.sinks import Sink

from ._bot_run import INVALID_OUTPUT_MESSAGE, _Live
from ._launch import LlmProfile, SandboxConfig, check_bot_id
from ._reconciler import LOGIN_STATE_FILES as LOGIN_STATE_FILES
from ._reconciler import _Reconciler
from ._transitions import desired_running, reason

__all__ = [
    "SupervisorConfig",
    "Supervisor",
    "open_supervisor",
    "Resolver",
    "STATES",
    "DESIRED_STATES",
    "INVALID_OUTPUT_MESSAGE",
    "Placement",
]

#: Every status a bot can be in.
STATES = ("starting", "waiting_for_qr", "running", "degraded", "stopping", "stopped", "failed")
#: Desired states the store may hold; ``restart`` and ``reissue_qr`` are one-shot requests.
DESIRED_STATES = ("running", "stopped", "restart", "reissue_qr")
_SINK_CLOSE_WAIT = 5.0  # how long each sink may take to drain, then to close

Resolver = Callable[[BotRecord], tuple[LlmProfile | None, SandboxConfig]]
"""Turns a bot's record into its LLM profile and sandbox (may raise :class:`AgentrtError`)."""


@attrs.frozen(kw_only=True)
class SupervisorConfig:
    """Tunables of one supervisor (durations in seconds)."""

    instances_dir: Path
    backoff: tuple[float, ...] = (5.0, 15.0, 30.0)
    max_restarts: int = 4
    reconcile_interval: float = 2.0
    term_grace: float = 3.0
    exit_grace: float = 2.0
    orphan_term_wait: float = 3.0
    sync_skills: bool = True
    skills_bundle: Path | None = None
    binary: Path | None = None
    parent_env: Mapping[str, str] | None = None
    lock: bool = True

    def __attrs_post_init__(self) -> None:
        if not self.backoff or any(not math.isfinite(b) or b < 0 for b in self.backoff):
            raise AgentrtError("invalid_supervisor_config", "backoff must be non-negative durations")
        if self.max_restarts < 1:
            raise AgentrtError("invalid_supervisor_config", "max_restarts must be at least 1")
        if not (self.reconcile_interval > 0 and math.isfinite(self.reconcile_interval)):
            raise AgentrtError("invalid_supervisor_config", "reconcile_interval must be positive")


class Placement(Protocol):
    """Which bots this supervisor may run (several supervisors sharing one store)."""

    def may_run(self, bot_id: str) -> bool:
        """Whether this node may run the bot now."""
        ...


class Supervisor(_Reconciler):
    """Keeps bots' processes matching their desired state.  Create with :func:`open_supervisor`."""

    def __init__(
        self,
        nursery: trio.Nursery,
        store: BotStore,
        *,
        config: SupervisorConfig,
        resolve: Resolver,
        fanout: Fanout,
        placement: Placement | None = None,
    ) -> None:
        self._nursery = nursery
        self._placement = placement
        self.store = store
        self.config = config
        self._resolve = resolve
        self._fanout = fanout
        self._env: Mapping[str, str] = config.parent_env if config.parent_env is not None else os.environ
        self._live: dict[str, _Live] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._seq: dict[str, int] = {}
        self._wake = trio.Event()
        self._closing = False
        self.reconcile_count = 0
        self._reconciled = trio.Event()

    # -- public API -------------------------------------------------------

    def live_bots(self) -> list[str]:
        """Ids of bots whose process this supervisor currently owns."""
        return sorted(self._live)

    def live_pid(self, bot_id: str) -> int | None:
        """The pid of the bot's live process, if any."""
        live = self._live.get(bot_id)
        return live.proc.pid if live is not None and live.proc is not None else None

    async def add_bot(self, bot_id: str, *, config: Mapping[str, Any] | None = None) -> BotRecord:
        """Create a bot (desired ``stopped``) unless it exists; return its record."""
        rec = await self.store.get_bot(check_bot_id(bot_id))
        if rec is None:
            rec = BotRecord(bot_id=bot_id, config=dict(config or {}))
            await self.store.save_bot(rec)
        return rec

    async def request_start(self, bot_id: str) -> None:
        """Ask for the bot to run (a ``failed`` bot is reset, as a user restart)."""
        await self._update(bot_id, desired_running)
        self.wake()

    async def request_stop(self, bot_id: str) -> None:
        """Ask for the bot to stop."""
        await self._update(bot_id, lambda r: attrs.evolve(r, desired_state="stopped"))
        self.wake()

    async def request_restart(self, bot_id: str) -> None:
        """Ask for a fresh start: stop the live process if any, reset the crash count, start."""
        await self._update(bot_id, lambda r: attrs.evolve(r, desired_state="restart"))
        self.wake()

    async def wait_reconciled(self, passes: int = 1) -> None:
        """Wait until the reconciler has completed ``passes`` more passes (bound it yourself)."""
        target = self.reconcile_count + passes
        while self.reconcile_count < target:
            self.wake()
            await self._reconciled.wait()

    async def request_qr_reissue(self, bot_id: str) -> None:
        """Ask for a fresh QR login: stop, forget the weixin login state, start again."""
        await self._update(bot_id, lambda r: attrs.evolve(r, desired_state="reissue_qr"))
        self.wake()

    def wake(self) -> None:
        """Run the reconciler now instead of at the next interval."""
        self._wake.set()

    def evict(self, bot_id: str) -> None:
        """Stop the bot's process now (bounded), without waiting for the store: its placement ended."""
        live = self._live.get(bot_id)
        if live is None:
            return
        live.stop_requested = True
        if live.proc is not None:
            self._nursery.start_soon(live.proc.stop)

    async def shutdown(self) -> None:
        """Stop every live process as a requested stop; desired states are kept."""
        self._closing = True
        with trio.CancelScope(shield=True):
            lives = list(self._live.values())
            async with trio.open_nursery() as n:
                for live in lives:
                    n.start_soon(self._stop_live, live, "supervisor shutdown")
            with trio.move_on_after(self.config.term_grace + self.config.exit_grace + 6):
                for live in lives:
                    await live.done.wait()

    # -- store helpers ------------------------------------------------------

    def _lock(self, bot_id: str) -> trio.Lock:
        lock = self._locks.get(bot_id)
        if lock is None:
            lock = self._locks[bot_id] = trio.Lock()
        return lock

    async def _update(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord], events: Sequence[Event] = ()
    ) -> BotRecord:
        """Read-modify-write of one record (serialized per bot inside this supervisor).

        Once saved, ``events`` and the resulting state change (if any) go out in one batch.
        """
        async with self._lock(bot_id):
            if isinstance(self.store, AtomicBotStore):
                pair = await self.store.update_bot(bot_id, change)
                if pair is None:
                    raise AgentrtError("unknown_bot", f"no bot named {bot_id!r}")
                rec, new = pair
            else:
                got = await self.store.get_bot(bot_id)
                if got is None:
                    raise AgentrtError("unknown_bot", f"no bot named {bot_id!r}")
                rec = got
                new = change(rec)
                if new is not rec:
                    if new.desired_state == rec.desired_state:
                        # Another process (the CLI) may have changed the desired state
                        # since we read it: never write back a stale one.
                        fresh = await self.store.get_bot(bot_id)
                        if fresh is not None and fresh.desired_state != rec.desired_state:
                            new = attrs.evolve(new, desired_state=fresh.desired_state)
                    await self.store.save_bot(new)
        out = list(events)
        if new.status != rec.status:
            out.append(StateChanged(state=new.status, previous=rec.status, reason=reason(new)))
        await self._emit(bot_id, out)
        return new

    async def _emit(self, bot_id: str, events: Sequence[Event]) -> None:
        if not events:
            return
        seq = self._seq.get(bot_id, 0)
        self._seq[bot_id] = seq + len(events)
        batch = EventBatch(
            source=bot_id, first_seq=seq, mono=trio.current_time(), wall=time.time(), events=tuple(events)
        )
        await self._fanout.send(batch)


@asynccontextmanager
async def open_supervisor(
    store: BotStore,
    *,
    config: SupervisorConfig,
    resolve: Resolver,
    sinks: Sequence[Sink] = (),
    placement: Placement | None = None,
) -> AsyncIterator[Supervisor]:
    """Run a supervisor for the body's duration.

    On entry: take the instances-directory lock (``supervisor_already_running``
    if another supervisor holds it), stop orphans, start the reconciler.  On
    exit: a requested stop of every live process (bounded), then sinks drain.
    With a ``placement``, only the bots it allows run here, and orphans are
    stopped when their bot is placed here (the records hide other hosts' pids).
    """
    if placement is None and getattr(store, "shared_between_hosts", False):
        # Without leases this supervisor would run every bot, whatever the other hosts run.
        raise AgentrtError("placement_required", "bots shared between hosts run under `agentrt bots supervise --redis`")
    lock_fd = await trio.to_thread.run_sync(_take_lock, config) if config.lock else None
    try:
        async with _unwrap_single(), trio.open_nursery() as sink_nursery:
            # Batches of several bots share the fan-out: never coalesced, and a sink
            # that fails once is detached (lifecycle events are few and matter).
            fanout = Fanout(sink_nursery, sinks, coalesce=False, max_failures=1, close_timeout=_SINK_CLOSE_WAIT)
            try:
                async with _unwrap_single(), trio.open_nursery() as nursery:
                    sup = Supervisor(
                        nursery, store, config=config, resolve=resolve, fanout=fanout, placement=placement
                    )
                    if placement is None:
                        await sup.recover_orphans()
                    nursery.start_soon(sup._reconcile_loop)
                    try:
                        yield sup
                    finally:
                        await sup.shutdown()
                        nursery.cancel_scope.cancel()
            finally:
                await fanout.aclose()
                sink_nursery.cancel_scope.cancel()
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


@asynccontextmanager
async def _unwrap_single() -> AsyncIterator[None]:
    """Re-raise a nursery's lone exception as itself (the body's error, not a group)."""
    with collapse_single_group():
        yield


def _take_lock(config: SupervisorConfig) -> int:
    Path(config.instances_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(Path(config.instances_dir) / ".supervisor.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise AgentrtError("supervisor_already_running", f"another supervisor manages {config.instances_dir}") from None
    return fd
