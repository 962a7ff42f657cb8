"""The bot supervisor: desired state, the lifecycle state machine, restarts.

One :class:`Supervisor` runs inside :func:`open_supervisor`'s nursery.  Each
bot with ``desired_state == "running"`` gets one :class:`~._bot_run.BotRun`
that spawns FastAgent (after a managed-skills sync), reads its stdout through
the core's read loop (:func:`agentrt.lowlevel.pump_events`) and the
``fastagent`` dialect, and applies each event to the bot's record in order
(the event → state rules of the reference supervisor, pure functions in
``_transitions``), every change through one :class:`~._ledger.BotLedger`.  A
reconciler loop (bounded interval, woken early by requests and by backoff
expiry) runs :func:`~._reconciler.reconcile`, which starts and stops runs so
that they match what the store asks for.  Because it only
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
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from agentrt.bots import BotRecord, BotStore, SharedBotStore
from agentrt.errors import AgentrtError
from agentrt.lowlevel import Fanout, collapse_single_group
from agentrt.sinks import Sink

from ._bot_run import INVALID_OUTPUT_MESSAGE, BotRun, RunContext
from ._launch import check_bot_id
from ._ledger import BotLedger
from ._reconciler import LOGIN_STATE_FILES as LOGIN_STATE_FILES
from ._reconciler import reconcile, recover_orphans
from ._supervisor_config import Placement, Resolver, SupervisorConfig
from ._transitions import desired_running

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


class Supervisor:
    """Keeps bots' processes matching their desired state.  Create with :func:`open_supervisor`.

    It holds one :class:`BotRun` per live bot and the :class:`BotLedger`
    they record through; each reconciler pass is :func:`reconcile` over them.
    """

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
        self._placement = placement
        self.store = store
        self.config = config
        self._ledger = BotLedger(store, fanout.send)
        self._runs: dict[str, BotRun] = {}
        self._ctx = RunContext(
            nursery=nursery,
            ledger=self._ledger,
            config=config,
            resolve=resolve,
            env=config.parent_env if config.parent_env is not None else os.environ,
            wake=self.wake,
            closing=lambda: self._closing,
        )
        self._wake = trio.Event()
        self._closing = False
        self.reconcile_count = 0
        self._reconciled = trio.Event()

    # -- public API -------------------------------------------------------

    def live_bots(self) -> list[str]:
        """Ids of bots whose process this supervisor currently owns."""
        return sorted(self._runs)

    def live_pid(self, bot_id: str) -> int | None:
        """The pid of the bot's live process, if any."""
        run = self._runs.get(bot_id)
        return run.pid if run is not None else None

    async def add_bot(self, bot_id: str, *, config: Mapping[str, Any] | None = None) -> BotRecord:
        """Create a bot (desired ``stopped``) unless it exists; return its record."""
        rec = await self.store.get_bot(check_bot_id(bot_id))
        if rec is None:
            rec = BotRecord(bot_id=bot_id, config=dict(config or {}))
            await self.store.save_bot(rec)
        return rec

    async def request_start(self, bot_id: str) -> None:
        """Ask for the bot to run (a ``failed`` bot is reset, as a user restart)."""
        await self._ledger.update(bot_id, desired_running)
        self.wake()

    async def request_stop(self, bot_id: str) -> None:
        """Ask for the bot to stop."""
        await self._ledger.update(bot_id, lambda r: attrs.evolve(r, desired_state="stopped"))
        self.wake()

    async def request_restart(self, bot_id: str) -> None:
        """Ask for a fresh start: stop the live process if any, reset the crash count, start."""
        await self._ledger.update(bot_id, lambda r: attrs.evolve(r, desired_state="restart"))
        self.wake()

    async def wait_reconciled(self, passes: int = 1) -> None:
        """Wait until the reconciler has completed ``passes`` more passes (bound it yourself)."""
        target = self.reconcile_count + passes
        while self.reconcile_count < target:
            self.wake()
            await self._reconciled.wait()

    async def request_qr_reissue(self, bot_id: str) -> None:
        """Ask for a fresh QR login: stop, forget the weixin login state, start again."""
        await self._ledger.update(bot_id, lambda r: attrs.evolve(r, desired_state="reissue_qr"))
        self.wake()

    def wake(self) -> None:
        """Run the reconciler now instead of at the next interval."""
        self._wake.set()

    def evict(self, bot_id: str) -> None:
        """Stop the bot's process now (bounded), without waiting for the store: its placement ended."""
        run = self._runs.get(bot_id)
        if run is not None:
            run.evict()

    async def reconcile(self) -> None:
        """One pass: start, stop or restart bots to match their desired state."""
        try:
            await reconcile(
                self._ledger, self._runs, config=self.config, placement=self._placement,
                start=self._start, closing=lambda: self._closing,
            )  # fmt: skip
        finally:
            self.reconcile_count += 1

    async def recover_orphans(self) -> None:
        """At start-up: stop processes an earlier supervisor left behind (pid and start time checked)."""
        await recover_orphans(self._ledger, self._runs, config=self.config)

    async def shutdown(self) -> None:
        """Stop every live process as a requested stop; desired states are kept."""
        self._closing = True
        with trio.CancelScope(shield=True):
            runs = list(self._runs.values())
            async with trio.open_nursery() as n:
                for run in runs:
                    n.start_soon(run.stop, "supervisor shutdown")
            with trio.move_on_after(self.config.term_grace + self.config.exit_grace + 6):
                for run in runs:
                    await run.done.wait()

    # -- internals ----------------------------------------------------------

    def _start(self, bot_id: str) -> None:
        run = self._runs[bot_id] = BotRun(self._ctx, bot_id, on_end=self._ended)
        run.start()

    def _ended(self, run: BotRun) -> None:
        self._runs.pop(run.bot_id, None)

    async def _reconcile_loop(self) -> None:
        while not self._closing:
            try:
                await self.reconcile()
            except AgentrtError as exc:
                print(f"agentrt: reconcile failed: {exc.code}: {exc.detail}", file=sys.stderr)
            except OSError as exc:  # the store's disk: try again next pass
                print(f"agentrt: reconcile failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._reconciled.set()
            self._reconciled = trio.Event()
            with trio.move_on_after(self.config.reconcile_interval):
                await self._wake.wait()
            self._wake = trio.Event()


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
    if placement is None and isinstance(store, SharedBotStore) and store.shared_between_hosts:
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
                    sup = Supervisor(nursery, store, config=config, resolve=resolve, fanout=fanout, placement=placement)
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
