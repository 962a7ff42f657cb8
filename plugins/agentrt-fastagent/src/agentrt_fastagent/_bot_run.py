"""One bot's run under the supervisor: prepare, spawn, read, apply its events, record its end.

A :class:`BotRun` wraps the core's engine (:class:`agentrt.lowlevel.HostedProcess`:
the process, its read loop, the bounded stop, the end handed over once) and is
its :class:`~agentrt.lowlevel.ProcessOwner`, with FastAgent's policy: the
launch contract checked again right before the spawn (``launch``), only the
spawned pid recorded (``on_spawn``, awaited before anything is read) and
signalled (:meth:`HostedProcess.signal`), invalid or oversize output fatal,
each lifecycle event applied to the record, stdout held past the exit swept,
an exit without ``stopped`` decided as stop or crash from the record alone,
the stderr tail saved.  A store error under one bot ends that bot's run: the
hook raises, the engine stops the process and hands the error back in
``on_exit`` (``owner_hook_failed``, the store's error as its cause), never
the supervisor.  The
supervisor keeps one run per live bot; what the runs share (the ledger, the
tunables, the nursery) is a :class:`RunContext`.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.dialect import HostCodec
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic, Event, Lifecycle, ProcessExited, TurnFailed
from agentrt.lowlevel import MALFORMED_LINE, AgentProcess, HostedProcess, ProcessEnd, ProcessSpec, RawTap

from ._bot_start import mark_failed, prepare_start
from ._dialect import INVALID_LINE, FastAgentHostCodec
from ._launch import InstancePaths, check_binary
from ._ledger import BotLedger
from ._procinfo import kill_pipe_holders, pipe_of, process_start_time
from ._schema import normalize_qr_url
from ._skills import sync_managed_skills
from ._supervisor_config import Resolver, SupervisorConfig
from ._transitions import QR_REJECTED, crash_plan, is_requested, lifecycle_change, mark_stopped, sync_status

__all__ = ["INVALID_OUTPUT_MESSAGE", "BotRun", "RunContext"]

#: Recorded with ``RUNTIME_ERROR`` when a process prints something the contract forbids.
INVALID_OUTPUT_MESSAGE = "FastAgent emitted invalid JSONL output."
_EMIT_WAIT = 5.0  # how long a shielded emit may wait for a full sink buffer


@attrs.frozen(kw_only=True)
class RunContext:
    """What every bot run of one supervisor shares."""

    nursery: trio.Nursery  # runs the bots' tasks (their runs, stops, escalations, backoff wake-ups)
    ledger: BotLedger
    config: SupervisorConfig
    resolve: Resolver
    env: Mapping[str, str]
    wake: Callable[[], None]  # run the reconciler now
    closing: Callable[[], bool]  # the supervisor is shutting down: start nothing


class BotRun:
    """One bot's run, from its preparation to its process's end.  ``done`` is set when it has ended."""

    def __init__(self, ctx: RunContext, bot_id: str, *, on_end: Callable[[BotRun], None]) -> None:
        self.bot_id = bot_id
        self._ctx = ctx
        self._on_end = on_end  # called once, as the run ends (before its ProcessExited goes out)
        self.proc: AgentProcess | None = None
        self.stop_requested = False
        self.done = trio.Event()
        self._fatal = False
        self._saw_stopped = False
        self._event_pid: int | None = None  # the pid its events carry (what it claimed); never signalled
        self._stdout_pipe: str | None = None  # ``pipe:[inode]`` of its stdout, to find who holds it after the exit
        self._hosted: HostedProcess | None = None  # the engine running its process, once built
        self._spec: ProcessSpec | None = None  # what launch gives the engine, once prepared
        self._error: BaseException | None = None  # what ended this run early (its store failed under a hook)

    @property
    def pid(self) -> int | None:
        """The pid of the spawned process (the only one ever signalled), once spawned."""
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Run in the context's nursery."""
        self._ctx.nursery.start_soon(self.run)

    def stop_soon(self, reason: str) -> None:
        """:meth:`stop` in the background."""
        self._ctx.nursery.start_soon(self.stop, reason)

    def evict(self) -> None:
        """Stop the process now (bounded), without a word to the store."""
        self.stop_requested = True
        if self._hosted is not None:
            self._ctx.nursery.start_soon(self._hosted.stop)

    async def stop(self, reason: str) -> None:
        """A requested stop: mark ``stopping`` first, then SIGTERM with bounded escalation."""
        if self.stop_requested:
            return
        self.stop_requested = True
        with trio.CancelScope(shield=True):
            try:
                await self._ctx.ledger.update(
                    self.bot_id,
                    lambda r: r if r.status in ("stopped", "failed") else attrs.evolve(r, status="stopping"),
                )
            except AgentrtError:
                pass  # deleted meanwhile: stop the process all the same
            if self._hosted is not None:
                await self._hosted.stop()

    async def run(self) -> None:
        """Sync the skills, spawn, read until the exit; errors of this bot end it, not the others."""
        ctx, bot_id = self._ctx, self.bot_id
        exited: ProcessExited | None = None
        try:
            prepared = await prepare_start(ctx.ledger, bot_id, config=ctx.config, resolve=ctx.resolve, env=ctx.env)
            if prepared is None:
                return
            spec, paths = prepared
            if ctx.config.sync_skills:
                result = await trio.to_thread.run_sync(sync_managed_skills, paths.data, ctx.config.skills_bundle)
                await ctx.ledger.emit(bot_id, [sync_status(result)])
            if self.stop_requested or ctx.closing():
                await ctx.ledger.update(bot_id, mark_stopped)
                return
            exited = await self._run_process(spec, paths)
        except AgentrtError as exc:
            # e.g. the bot was deleted while running: this bot ends, the others go on.
            print(f"agentrt: bot {bot_id}: {exc.code}: {exc.detail}", file=sys.stderr)
        except OSError as exc:  # the store's disk failed under this bot: the others go on
            print(f"agentrt: bot {bot_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            self._on_end(self)
            if exited is not None:
                # Before `done`: a shutdown waiting for it must not cut this event off.
                with trio.CancelScope(shield=True), trio.move_on_after(_EMIT_WAIT):
                    await ctx.ledger.emit(bot_id, [exited])
            self.done.set()
            ctx.wake()

    async def _run_process(self, spec: ProcessSpec, paths: InstancePaths) -> ProcessExited | None:
        ledger, bot_id, ctx = self._ctx.ledger, self.bot_id, self._ctx
        grace = ctx.config.exit_grace
        # EOF without exit: the process closed stdout but lives on; it is stopped after `exit_wait`.
        # Exit without EOF: a grandchild holds stdout; reading ends `exit_grace` after the exit.
        self._spec = spec
        self._hosted = hosted = HostedProcess(self, nursery=ctx.nursery, exit_grace=grace, exit_wait=grace)
        try:
            proc = await hosted.ensure()  # launch checks the binary; on_spawn records the pid before any read
        except AgentrtError as exc:  # refused by the launch contract, or spawn_failed
            message = f"FastAgent runtime could not be started. ({exc.detail})"
            await mark_failed(ledger, bot_id, "FASTAGENT_START_FAILED", message, diagnostic=exc.code)
            return None
        try:
            if self.stop_requested:
                await hosted.stop()
            await hosted.wait()  # its output ended, on_exit returned, its context left
        finally:
            # Done with already, or (a cancel) the bounded stop: stderr is drained to its end.
            status = await hosted.stop()
        if self._error is not None:
            raise self._error
        await _save_stderr(paths, proc)
        if status is None:  # the engine's drain wait ran out: the process itself is reaped all the same
            status = await proc.stop()
        if not self._saw_stopped:
            await self._after_exit(status.returncode, status.signal)
        return ProcessExited(returncode=status.returncode, signal=status.signal, requested=self.stop_requested)

    # -- the engine's owner (ProcessOwner): FastAgent's policy; a hook that raises ends this bot only --

    async def launch(self, resume: str | None, codec: HostCodec) -> ProcessSpec:
        """The prepared spec, its binary checked again right before the spawn."""
        spec = self._spec
        assert spec is not None
        # The skills sync ran since prepare_start's check, and the executable may have been
        # swapped (for a link, a directory) meanwhile.
        await trio.to_thread.run_sync(check_binary, Path(spec.argv[0]))
        return spec

    def new_codec(self, resume: str | None) -> HostCodec:
        """Every process speaks a fresh FastAgent codec."""
        return FastAgentHostCodec()

    def probe(self) -> None:
        """FastAgent's output is checked line by line (``_handle``), not by the protocol probe."""
        return None

    def tap(self, process: AgentProcess, number: int) -> RawTap | None:
        """No raw taps for bots."""
        return None

    def idle(self) -> bool:
        """Nobody waits on a bot's output: its read loop parks while the pipe is quiet (no task per quiet bot)."""
        return True

    async def on_spawn(self, process: AgentProcess) -> None:
        """Record the spawned pid (with its start time): only it is ever signalled; awaited before any read."""
        self.proc = process
        self._event_pid = process.pid
        started_at = await trio.to_thread.run_sync(process_start_time, process.pid)
        self._stdout_pipe = await trio.to_thread.run_sync(pipe_of, process.pid)

        def spawned(r: BotRecord) -> BotRecord:
            if r.status in ("stopping", "stopped", "failed") and self.stop_requested:
                return r
            return attrs.evolve(r, status="starting", pid=process.pid, process_started_at=started_at)

        await self._ctx.ledger.update(self.bot_id, spawned)

    async def on_events(self, events: list[Event]) -> None:
        """Apply each lifecycle event; invalid output is fatal."""
        proc = self.proc
        assert proc is not None  # on_spawn came first
        await self._handle(proc, events)

    async def on_oversize(self, process: AgentProcess, before: list[Event]) -> bool:
        """What came before counts; the long line is fatal."""
        await self._handle(process, before)
        await self._fail(process, "a stdout line exceeded the size limit")
        return True  # keep reading (and discarding) so the process can print stopping/stopped

    async def on_send_error(self, error: AgentrtError) -> None:
        """The FastAgent codec owes the process nothing: never called."""

    async def on_mismatch(self, failure: TurnFailed) -> None:
        """No protocol probe (:meth:`probe`): never called."""

    async def on_exit(self, end: ProcessEnd) -> None:
        """The output ended and the process exited (its group not yet killed)."""
        if end.failure is not None:
            self._error = end.failure.__cause__ or end.failure  # the store's own error, as the run reports it
            return
        if not end.output.eof and self._stdout_pipe is not None:
            # Exited, yet stdout never ended: a grandchild holds it.  The final stop kills the
            # bot's group; one in a group (or session) of its own is found by the pipe it holds.
            holders = await trio.to_thread.run_sync(kill_pipe_holders, self._stdout_pipe)
            if holders:
                detail = f"killed {len(holders)} process(es) still holding stdout after the exit"
                diagnostic = Diagnostic(code="fastagent_stdout_held", detail=detail)
                try:
                    await self._ctx.ledger.emit(self.bot_id, [diagnostic])
                except (AgentrtError, OSError) as exc:  # e.g. deleted meanwhile: this bot's run ends with it
                    self._error = exc

    async def _handle(self, proc: AgentProcess, events: Sequence[Event]) -> None:
        for ev in events:
            if isinstance(ev, Diagnostic):
                if ev.code == INVALID_LINE:
                    await self._fail(proc, ev.detail)
                elif ev.code == MALFORMED_LINE:
                    await self._fail(proc, "a stdout line is not JSON")
            elif isinstance(ev, Lifecycle):
                await self._apply(proc, ev)

    async def _fail(self, proc: AgentProcess, why: str) -> None:
        """Invalid output: record RUNTIME_ERROR once, SIGTERM; afterwards only stopping/stopped apply."""
        if self._fatal:
            return
        self._fatal = True
        ledger = self._ctx.ledger
        await ledger.update(
            self.bot_id,
            lambda r: attrs.evolve(r, last_error_code="RUNTIME_ERROR", last_error_message=INVALID_OUTPUT_MESSAGE),
        )
        await ledger.emit(self.bot_id, [Diagnostic(code="fastagent_invalid_output", detail=why)])
        hosted = self._hosted
        assert hosted is not None
        hosted.signal(signal.SIGTERM)  # the group the engine spawned, no other
        self._ctx.nursery.start_soon(self._escalate_later, hosted, proc)

    async def _escalate_later(self, hosted: HostedProcess, proc: AgentProcess) -> None:
        # SIGTERM was sent; if it is ignored, the bounded stop finishes the job.
        with trio.move_on_after(self._ctx.config.term_grace):
            await proc.exited.wait()
        if not proc.exited.is_set():
            await hosted.stop()

    async def _apply(self, proc: AgentProcess, ev: Lifecycle) -> None:
        bot_id, ctx = self.bot_id, self._ctx
        if ev.agent_id is not None and ev.agent_id != bot_id:
            await self._fail(proc, "agentId is not this bot's id")
            return
        if self._fatal and ev.kind not in ("stopping", "stopped"):
            return
        if self._saw_stopped:
            return  # nothing a process says after its own `stopped` can be true any more
        if await ctx.ledger.store.get_bot(bot_id) is None:
            return
        if ev.kind != "process_started" and self._event_pid is not None and ev.pid != self._event_pid:
            return  # not the pid this process announced: ignored, not recorded
        data = ev.data
        extra: list[Event] = []
        if ev.kind == "process_started" and ev.pid != proc.pid:
            # A claim is never recorded as the pid to signal: that stays the one we spawned.
            self._event_pid = ev.pid
            extra.append(Diagnostic(
                code="fastagent_pid_claim_ignored",
                detail=f"process_started names pid {ev.pid}, but the spawned process is {proc.pid}",
            ))  # fmt: skip
        if ev.kind == "qr_code" and not isinstance(data.get("qrCodeUrl"), str):
            await self._fail(proc, "qr_code without data.qrCodeUrl")
            return
        account = data.get("accountId")
        if ev.kind == "login_confirmed" and not (isinstance(account, str) and account):
            await self._fail(proc, "login_confirmed without data.accountId")
            return
        now = time.time()
        cfg = ctx.config

        def change(r: BotRecord) -> BotRecord:
            if ev.kind == "stopped":
                self._saw_stopped = True
            return lifecycle_change(r, ev, now, backoff=cfg.backoff, max_restarts=cfg.max_restarts)

        if ev.kind == "qr_code" and normalize_qr_url(data.get("qrCodeUrl")) is None:
            extra.append(Diagnostic(code="invalid_qr_url", detail=QR_REJECTED))
        new = await ctx.ledger.update(bot_id, change, [ev, *extra])
        if ev.kind == "stopped" and new.status == "stopped" and new.backoff_until is not None:
            ctx.nursery.start_soon(self._wake_at, new.backoff_until)

    async def _after_exit(self, returncode: int | None, sig: int | None) -> None:
        """The process ended without a ``stopped`` event: decide stop or crash from the record."""
        how = f"code {returncode}" if returncode is not None else f"signal {sig}"
        now = time.time()
        cfg = self._ctx.config

        def change(r: BotRecord) -> BotRecord:
            if is_requested(r) or r.status == "failed":
                return attrs.evolve(r, status=r.status if r.status == "failed" else "stopped", pid=None,
                                    process_started_at=None)  # fmt: skip
            return crash_plan(
                r, f"FastAgent exited without a stopped event ({how}).", now,
                backoff=cfg.backoff, max_restarts=cfg.max_restarts,
            )  # fmt: skip

        try:
            new = await self._ctx.ledger.update(self.bot_id, change)
        except AgentrtError:
            return
        if new.backoff_until is not None:
            self._ctx.nursery.start_soon(self._wake_at, new.backoff_until)

    async def _wake_at(self, when: float) -> None:
        await trio.sleep(max(0.0, when - time.time()))
        self._ctx.wake()


async def _save_stderr(paths: InstancePaths, proc: AgentProcess) -> None:
    """Append the process's stderr tail to the instance's log, headed by its pid and exit time."""
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
