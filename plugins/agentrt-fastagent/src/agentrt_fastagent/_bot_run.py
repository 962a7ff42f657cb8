"""One bot's process under the supervisor: prepare, spawn, read, apply its events, record its end.

A mixin of :class:`agentrt_fastagent._supervisor.Supervisor` (the state stays
on the supervisor): the launch contract checked again right before the spawn,
only the spawned pid recorded and signalled, invalid output fatal, and an exit
without ``stopped`` decided as stop or crash from the record alone.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from agentrt.bots import BotRecord, BotStore
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic, Event, Lifecycle, ProcessExited
from agentrt.lowlevel import MALFORMED_LINE, AgentProcess, ProcessSpec, open_process, pump_events

from ._dialect import INVALID_LINE, FastAgentHostCodec
from ._launch import InstancePaths, build_process_spec, check_binary, instance_paths, prepare_instance, resolve_binary
from ._procinfo import kill_pipe_holders, pipe_of, process_start_time
from ._schema import normalize_qr_url
from ._skills import sync_managed_skills
from ._transitions import QR_REJECTED, crash_plan, is_requested, lifecycle_change, mark_stopped, sync_status

if TYPE_CHECKING:
    from ._supervisor import Placement, Resolver, SupervisorConfig

__all__ = ["INVALID_OUTPUT_MESSAGE"]

#: Recorded with ``RUNTIME_ERROR`` when a process prints something the contract forbids.
INVALID_OUTPUT_MESSAGE = "FastAgent emitted invalid JSONL output."
_EMIT_WAIT = 5.0  # how long a shielded emit may wait for a full sink buffer

_START_CODES = {
    "llm_profile_required": ("LLM_PROFILE_REQUIRED", "The bot has no LLM profile."),
    "llm_profile_invalid": ("LLM_PROFILE_INVALID", "The bot's LLM profile is incomplete."),
    "sandbox_config_invalid": ("SANDBOX_CONFIG_INVALID", "The bot's sandbox configuration is invalid."),
}


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


class _BotRuns:
    """Each bot's run, from its preparation to its process's end."""

    _nursery: trio.Nursery
    _placement: Placement | None
    store: BotStore
    config: SupervisorConfig
    _resolve: Resolver
    _env: Mapping[str, str]
    _live: dict[str, _Live]
    _closing: bool

    if TYPE_CHECKING:

        async def _update(
            self, bot_id: str, change: Callable[[BotRecord], BotRecord], events: Sequence[Event] = ()
        ) -> BotRecord: ...

        async def _emit(self, bot_id: str, events: Sequence[Event]) -> None: ...

        def wake(self) -> None: ...

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
