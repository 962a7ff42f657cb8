"""The supervisor's reconciler: processes made to match the store's desired states; orphans.

A mixin of :class:`agentrt_fastagent._supervisor.Supervisor` (the state stays
on the supervisor).  It reads only the desired state from the store, so any
process sharing the store controls a running supervisor.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError
from agentrt.events import Status

from ._bot_run import _BotRuns
from ._launch import instance_paths
from ._procinfo import stop_orphan_tree
from ._transitions import ACTIVE, ONE_SHOT, in_backoff, reset_for_reissue, reset_for_restart

__all__ = ["LOGIN_STATE_FILES"]

#: Login state FastAgent keeps in the data directory; a QR reissue deletes it.
LOGIN_STATE_FILES = ("accounts-roster.jsonl", "accounts-runtime.jsonl", "bindings.jsonl")


class _Reconciler(_BotRuns):
    """Starts, stops and restarts bots to match their desired state; stops orphans at start-up."""

    _wake: trio.Event
    _reconciled: trio.Event
    reconcile_count: int

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


def _forget_login(data: Path) -> None:
    for name in LOGIN_STATE_FILES:
        (data / name).unlink(missing_ok=True)
