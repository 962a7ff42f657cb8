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
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from agentrt.bots import AtomicBotStore, BotRecord, BotStore
from agentrt.errors import AgentrtError
from agentrt.events import (
    Diagnostic,
    Event,
    EventBatch,
    Lifecycle,
    ProcessExited,
    StateChanged,
    Status,
)
from agentrt.lowlevel import (
    MALFORMED_LINE,
    AgentProcess,
    Fanout,
    ProcessSpec,
    collapse_single_group,
    open_process,
    pump_events,
)
from agentrt.sinks import Sink

from ._dialect import INVALID_LINE, FastAgentHostCodec
from ._launch import (
    InstancePaths,
    LlmProfile,
    SandboxConfig,
    build_process_spec,
    check_binary,
    check_bot_id,
    instance_paths,
    prepare_instance,
    resolve_binary,
)
from ._procinfo import kill_pipe_holders, pipe_of, process_start_time, stop_orphan_tree
from ._schema import normalize_qr_url
from ._skills import sync_managed_skills
from ._transitions import (
    ACTIVE,
    ONE_SHOT,
    QR_REJECTED,
    crash_plan,
    desired_running,
    in_backoff,
    is_requested,
    lifecycle_change,
    mark_stopped,
    reason,
    reset_for_reissue,
    reset_for_restart,
    sync_status,
)

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
#: Login state FastAgent keeps in the data directory; a QR reissue deletes it.
LOGIN_STATE_FILES = ("accounts-roster.jsonl", "accounts-runtime.jsonl", "bindings.jsonl")
#: Recorded with ``RUNTIME_ERROR`` when a process prints something the contract forbids.
INVALID_OUTPUT_MESSAGE = "FastAgent emitted invalid JSONL output."
_EMIT_WAIT = 5.0  # how long a shielded emit may wait for a full sink buffer
_SINK_CLOSE_WAIT = 5.0  # how long each sink may take to drain, then to close

Resolver = Callable[[BotRecord], tuple[LlmProfile | None, SandboxConfig]]
"""Turns a bot's record into its LLM profile and sandbox (may raise :class:`AgentrtError`)."""

_START_CODES = {
    "llm_profile_required": ("LLM_PROFILE_REQUIRED", "The bot has no LLM profile."),
    "llm_profile_invalid": ("LLM_PROFILE_INVALID", "The bot's LLM profile is incomplete."),
    "sandbox_config_invalid": ("SANDBOX_CONFIG_INVALID", "The bot's sandbox configuration is invalid."),
}


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


@attrs.define(eq=False)
class _Live:
    bot_id: str
    proc: AgentProcess | None = None
    fatal: bool = False
    saw_stopped: bool = False
    stop_requested: bool = False
    event_pid: int | None = None  # the pid its events carry (what it claimed); never signalled
    stdout_pipe: str | None = None  # ``pipe:[inode]`` of its stdout, to find who holds it after the exit
    done: trio.Event = attrs.field(factory=trio.Event)


class Supervisor:
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

    # -- reconciler -------------------------------------------------------

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

    async def reconcile(self) -> None:
        """One pass: start, stop or restart bots to match their desired state."""
        try:
            await self._reconcile_once()
        finally:
            self.reconcile_count += 1

    async def _reconcile_once(self) -> None:
        now = time.time()
        records = await self.store.list_bots()
        known = {rec.bot_id for rec in records}
        for bot_id, running in list(self._live.items()):
            if bot_id not in known and not running.stop_requested:
                # Deleted while running: nobody wants it any more.
                self._nursery.start_soon(self._stop_live, running, "bot deleted")
        for rec in records:
            if self._closing:
                return
            live = self._live.get(rec.bot_id)
            if self._placement is not None and not self._placement.may_run(rec.bot_id):
                if live is not None and not live.stop_requested:
                    self._nursery.start_soon(self._stop_live, live, "not placed on this node")
                continue
            if rec.desired_state in ONE_SHOT:
                if live is not None:
                    if not live.stop_requested:
                        self._nursery.start_soon(self._stop_live, live, f"{rec.desired_state} requested")
                    continue  # started again once the old process is gone
                if rec.desired_state == "reissue_qr":
                    paths = instance_paths(self.config.instances_dir, rec.bot_id)
                    await trio.to_thread.run_sync(_forget_login, paths.data)
                    rec = await self._update(rec.bot_id, reset_for_reissue)
                else:
                    rec = await self._update(rec.bot_id, reset_for_restart)
            if rec.desired_state == "running":
                if live is None and rec.status != "failed" and not in_backoff(rec, now):
                    if rec.pid is not None:
                        await self._recover_orphan(rec)
                    self._start(rec.bot_id)
            elif live is not None and not live.stop_requested:
                self._nursery.start_soon(self._stop_live, live, "stop requested")

    async def recover_orphans(self) -> None:
        """At start-up: stop processes an earlier supervisor left behind (pid and start time checked)."""
        for rec in await self.store.list_bots():
            if rec.pid is not None and rec.bot_id not in self._live:
                await self._recover_orphan(rec)

    async def _recover_orphan(self, rec: BotRecord) -> None:
        """Stop the recorded process (pid and start time checked) and sweep its process group."""
        assert rec.pid is not None
        # The bot's own environment entry: what proves a grandchild ours once its leader is gone.
        marker = f"IM_GATEWAY_DATA_DIR={instance_paths(self.config.instances_dir, rec.bot_id).data}".encode()
        outcome, swept = await trio.to_thread.run_sync(
            lambda: stop_orphan_tree(
                rec.pid or 0, rec.process_started_at, marker=marker, term_wait=self.config.orphan_term_wait
            )
        )
        await self._emit(
            rec.bot_id,
            [Status(kind="orphan_checked", label=outcome, detail={"pid": rec.pid, "swept": swept})],
        )

        def mark(r: BotRecord) -> BotRecord:
            status = "stopped" if r.status in ACTIVE else r.status
            return attrs.evolve(r, pid=None, process_started_at=None, status=status)

        await self._update(rec.bot_id, mark)

    # -- one bot ----------------------------------------------------------

    def _start(self, bot_id: str) -> None:
        live = _Live(bot_id=bot_id)
        self._live[bot_id] = live
        self._nursery.start_soon(self._run_bot, live)

    async def _stop_live(self, live: _Live, reason: str) -> None:
        """A requested stop: mark ``stopping`` first, then SIGTERM with bounded escalation."""
        if live.stop_requested:
            return
        live.stop_requested = True
        with trio.CancelScope(shield=True):
            try:
                await self._update(
                    live.bot_id,
                    lambda r: r if r.status in ("stopped", "failed") else attrs.evolve(r, status="stopping"),
                )
            except AgentrtError:
                pass  # deleted meanwhile: stop the process all the same
            if live.proc is not None:
                await live.proc.stop()

    async def _run_bot(self, live: _Live) -> None:
        bot_id = live.bot_id
        exited: ProcessExited | None = None
        try:
            spec, paths = await self._prepare(bot_id)
            if spec is None or paths is None:
                return
            if self.config.sync_skills:
                result = await trio.to_thread.run_sync(sync_managed_skills, paths.data, self.config.skills_bundle)
                await self._emit(bot_id, [sync_status(result)])
            if live.stop_requested or self._closing:
                await self._update(bot_id, mark_stopped)
                return
            exited = await self._run_process(live, spec, paths)
        except AgentrtError as exc:
            # e.g. the bot was deleted while running: this bot ends, the others go on.
            print(f"agentrt: bot {bot_id}: {exc.code}: {exc.detail}", file=sys.stderr)
        except OSError as exc:  # the store's disk failed under this bot: the others go on
            print(f"agentrt: bot {bot_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            self._live.pop(bot_id, None)
            if exited is not None:
                # Before `done`: a shutdown waiting for it must not cut this event off.
                with trio.CancelScope(shield=True), trio.move_on_after(_EMIT_WAIT):
                    await self._emit(bot_id, [exited])
            live.done.set()
            self.wake()

    async def _prepare(self, bot_id: str) -> tuple[ProcessSpec | None, InstancePaths | None]:
        rec = await self.store.get_bot(bot_id)
        if rec is None:
            return None, None
        try:
            profile, sandbox = self._resolve(rec)
            paths = instance_paths(self.config.instances_dir, bot_id)
            # resolve_binary stats candidate paths: keep it off the trio thread.
            binary = self.config.binary
            if binary is None:
                binary = await trio.to_thread.run_sync(resolve_binary, self._env)
            spec = build_process_spec(
                bot_id=bot_id, binary=binary, profile=profile, sandbox=sandbox, paths=paths,
                parent_env=self._env, term_grace=self.config.term_grace,
            )  # fmt: skip
            await trio.to_thread.run_sync(prepare_instance, paths, binary)
        except AgentrtError as exc:
            code, message = _START_CODES.get(
                exc.code, ("FASTAGENT_START_FAILED", "FastAgent runtime could not be started.")
            )
            await self._mark_failed(bot_id, code, f"{message} ({exc.detail})", diagnostic=exc.code)
            return None, None
        assert profile is not None  # build_process_spec refuses a missing profile (llm_profile_required)
        model = profile.model
        # The model this start runs with, as the record's snapshot (the profile may change later).
        await self._update(bot_id, lambda r: r if r.model == model else attrs.evolve(r, model=model))
        return spec, paths

    async def _mark_failed(self, bot_id: str, code: str, message: str, *, diagnostic: str | None = None) -> None:
        await self._update(
            bot_id,
            lambda r: attrs.evolve(
                r, status="failed", last_error_code=code, last_error_message=message, restart_count=0,
                backoff_until=None, pid=None, process_started_at=None,
            ),
        )  # fmt: skip
        await self._emit(bot_id, [Diagnostic(code=diagnostic or code.lower(), detail=message)])

    async def _run_process(self, live: _Live, spec: ProcessSpec, paths: InstancePaths) -> ProcessExited | None:
        bot_id = live.bot_id
        try:
            # Again, right before the spawn: the skills sync ran since _prepare's check, and
            # the executable may have been swapped (for a link, a directory) meanwhile.
            await trio.to_thread.run_sync(check_binary, Path(spec.argv[0]))
            async with open_process(spec) as proc:
                live.proc = proc
                live.event_pid = proc.pid
                # Only this pid (with its start time) is recorded, so only it is ever signalled.
                started_at = await trio.to_thread.run_sync(process_start_time, proc.pid)
                live.stdout_pipe = await trio.to_thread.run_sync(pipe_of, proc.pid)

                def spawned(r: BotRecord) -> BotRecord:
                    if r.status in ("stopping", "stopped", "failed") and live.stop_requested:
                        return r
                    return attrs.evolve(r, status="starting", pid=proc.pid, process_started_at=started_at)

                await self._update(bot_id, spawned)
                if live.stop_requested:
                    await proc.stop()
                await self._pump_until_exit(live, proc)
                status = await proc.stop()
            # After the context: stderr has been drained to its end.
            await self._save_stderr(paths, proc)
        except AgentrtError as exc:
            if live.proc is None:  # refused by the launch contract, or spawn_failed
                message = f"FastAgent runtime could not be started. ({exc.detail})"
                await self._mark_failed(bot_id, "FASTAGENT_START_FAILED", message, diagnostic=exc.code)
                return None
            raise
        if not live.saw_stopped:
            await self._after_exit(bot_id, status.returncode, status.signal)
        return ProcessExited(returncode=status.returncode, signal=status.signal, requested=live.stop_requested)

    async def _pump_until_exit(self, live: _Live, proc: AgentProcess) -> None:
        """Apply stdout until EOF and the exit, each waiting at most ``exit_grace`` for the other.

        The core's read loop does the reading, framing and decoding; what is
        FastAgent's own is the policy: an invalid or oversize line is fatal, a
        lifecycle event is applied to the record.  EOF without exit: the
        process closed stdout but lives on; it is stopped.  Exit without EOF:
        a grandchild holds stdout open; reading stops (and the final stop
        kills the whole process group, the sweep below what escaped it).
        """
        grace = self.config.exit_grace

        async def on_events(events: list[Event]) -> None:
            await self._handle(live, events)

        async def on_oversize(before: list[Event]) -> bool:
            await self._handle(live, before)
            await self._fatal(live, "a stdout line exceeded the size limit")
            return True  # keep reading (and discarding) so the process can print stopping/stopped

        result = await pump_events(proc, FastAgentHostCodec(), on_events, on_oversize=on_oversize, exit_grace=grace)
        if result.eof:
            with trio.move_on_after(grace):
                await proc.exited.wait()
            if not proc.exited.is_set():
                await proc.stop()
        elif live.stdout_pipe is not None:
            # Exited, yet stdout never ended: a grandchild holds it.  The final stop kills the
            # bot's group; one in a group (or session) of its own is found by the pipe it holds.
            pipe = live.stdout_pipe
            holders = await trio.to_thread.run_sync(kill_pipe_holders, pipe)
            if holders:
                detail = f"killed {len(holders)} process(es) still holding stdout after the exit"
                await self._emit(live.bot_id, [Diagnostic(code="fastagent_stdout_held", detail=detail)])

    async def _handle(self, live: _Live, events: Sequence[Event]) -> None:
        for ev in events:
            if isinstance(ev, Diagnostic):
                if ev.code == INVALID_LINE:
                    await self._fatal(live, ev.detail)
                elif ev.code == MALFORMED_LINE:
                    await self._fatal(live, "a stdout line is not JSON")
            elif isinstance(ev, Lifecycle):
                await self._apply(live, ev)

    async def _fatal(self, live: _Live, why: str) -> None:
        """Invalid output: record RUNTIME_ERROR once, SIGTERM; afterwards only stopping/stopped apply."""
        if live.fatal:
            return
        live.fatal = True
        await self._update(
            live.bot_id,
            lambda r: attrs.evolve(r, last_error_code="RUNTIME_ERROR", last_error_message=INVALID_OUTPUT_MESSAGE),
        )
        await self._emit(live.bot_id, [Diagnostic(code="fastagent_invalid_output", detail=why)])
        if live.proc is not None:
            live.proc.send_signal(signal.SIGTERM)
            self._nursery.start_soon(self._escalate_later, live.proc)

    async def _escalate_later(self, proc: AgentProcess) -> None:
        # SIGTERM was sent; if it is ignored, the bounded stop finishes the job.
        with trio.move_on_after(self.config.term_grace):
            await proc.exited.wait()
        if not proc.exited.is_set():
            await proc.stop()

    async def _apply(self, live: _Live, ev: Lifecycle) -> None:
        bot_id = live.bot_id
        if ev.agent_id is not None and ev.agent_id != bot_id:
            await self._fatal(live, "agentId is not this bot's id")
            return
        if live.fatal and ev.kind not in ("stopping", "stopped"):
            return
        if live.saw_stopped:
            return  # nothing a process says after its own `stopped` can be true any more
        rec = await self.store.get_bot(bot_id)
        if rec is None:
            return
        if ev.kind != "process_started" and live.event_pid is not None and ev.pid != live.event_pid:
            return  # not the pid this process announced: ignored, not recorded
        data = ev.data
        extra: list[Event] = []
        if ev.kind == "process_started" and live.proc is not None and ev.pid != live.proc.pid:
            # A claim is never recorded as the pid to signal: that stays the one we spawned.
            live.event_pid = ev.pid
            extra.append(Diagnostic(
                code="fastagent_pid_claim_ignored",
                detail=f"process_started names pid {ev.pid}, but the spawned process is {live.proc.pid}",
            ))  # fmt: skip
        if ev.kind == "qr_code" and not isinstance(data.get("qrCodeUrl"), str):
            await self._fatal(live, "qr_code without data.qrCodeUrl")
            return
        account = data.get("accountId")
        if ev.kind == "login_confirmed" and not (isinstance(account, str) and account):
            await self._fatal(live, "login_confirmed without data.accountId")
            return
        now = time.time()
        cfg = self.config

        def change(r: BotRecord) -> BotRecord:
            if ev.kind == "stopped":
                live.saw_stopped = True
            return lifecycle_change(r, ev, now, backoff=cfg.backoff, max_restarts=cfg.max_restarts)

        if ev.kind == "qr_code" and normalize_qr_url(data.get("qrCodeUrl")) is None:
            extra.append(Diagnostic(code="invalid_qr_url", detail=QR_REJECTED))
        new = await self._update(bot_id, change, [ev, *extra])
        if ev.kind == "stopped" and new.status == "stopped" and new.backoff_until is not None:
            self._nursery.start_soon(self._wake_at, new.backoff_until)

    async def _after_exit(self, bot_id: str, returncode: int | None, sig: int | None) -> None:
        """The process ended without a ``stopped`` event: decide stop or crash from the record."""
        how = f"code {returncode}" if returncode is not None else f"signal {sig}"
        now = time.time()

        def change(r: BotRecord) -> BotRecord:
            if is_requested(r) or r.status == "failed":
                return attrs.evolve(r, status=r.status if r.status == "failed" else "stopped", pid=None,
                                    process_started_at=None)  # fmt: skip
            return crash_plan(
                r, f"FastAgent exited without a stopped event ({how}).", now,
                backoff=self.config.backoff, max_restarts=self.config.max_restarts,
            )  # fmt: skip

        try:
            new = await self._update(bot_id, change)
        except AgentrtError:
            return
        if new.backoff_until is not None:
            self._nursery.start_soon(self._wake_at, new.backoff_until)

    async def _wake_at(self, when: float) -> None:
        await trio.sleep(max(0.0, when - time.time()))
        self.wake()

    async def _save_stderr(self, paths: InstancePaths, proc: AgentProcess) -> None:
        tail = proc.stderr_tail()
        if not tail:
            return
        path = trio.Path(paths.logs / "fastagent.stderr.log")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        header = f"--- pid {proc.pid} exited {stamp}\n".encode()
        try:
            async with await path.open("ab") as fh:
                await fh.write(header + tail + (b"" if tail.endswith(b"\n") else b"\n"))
        except OSError:
            pass  # logs are best effort


def _forget_login(data: Path) -> None:
    for name in LOGIN_STATE_FILES:
        (data / name).unlink(missing_ok=True)


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
