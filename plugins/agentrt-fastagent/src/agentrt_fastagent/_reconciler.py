"""Reconciliation: the bots' processes made to match the store's desired states; orphans.

:func:`reconcile` is one pass over the store, desired against actual (the
live :class:`~agentrt_fastagent._bot_run.BotRun` of each bot).  It reads only
the desired state from the store, so any process sharing the store (the
``agentrt bots`` CLI) controls a running supervisor.  :func:`recover_orphan`
stops a process an earlier supervisor left behind, checked by pid and start
time, and sweeps its process group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.events import Status

from ._bot_run import BotRun
from ._launch import instance_paths
from ._ledger import BotLedger
from ._procinfo import stop_orphan_tree
from ._supervisor_config import Placement, SupervisorConfig
from ._transitions import ACTIVE, ONE_SHOT, in_backoff, reset_for_reissue, reset_for_restart

__all__ = ["LOGIN_STATE_FILES", "reconcile", "recover_orphans", "recover_orphan"]

#: Login state FastAgent keeps in the data directory; a QR reissue deletes it.
LOGIN_STATE_FILES = ("accounts-roster.jsonl", "accounts-runtime.jsonl", "bindings.jsonl")


async def reconcile(
    ledger: BotLedger,
    runs: Mapping[str, BotRun],
    *,
    config: SupervisorConfig,
    placement: Placement | None,
    start: Callable[[str], object],
    closing: Callable[[], bool],
) -> None:
    """One pass: start, stop or restart bots so that ``runs`` match the store's desired states.

    ``runs`` are the live runs by bot id; ``start(bot_id)`` starts one (and
    adds it to ``runs``).  Stops go to the background (:meth:`BotRun.stop_soon`);
    a one-shot request (``restart``, ``reissue_qr``) waits for the old run's
    end, and is then reset and started.  Once ``closing()``, nothing more is
    started.  With a ``placement``, a bot it does not allow here is stopped.
    """
    now = time.time()
    records = await ledger.store.list_bots()
    known = {rec.bot_id for rec in records}
    for bot_id, running in list(runs.items()):
        if bot_id not in known and not running.stop_requested:
            # Deleted while running: nobody wants it any more.
            running.stop_soon("bot deleted")
    for rec in records:
        if closing():
            return
        run = runs.get(rec.bot_id)
        if placement is not None and not placement.may_run(rec.bot_id):
            if run is not None and not run.stop_requested:
                run.stop_soon("not placed on this node")
            continue
        if rec.desired_state in ONE_SHOT:
            if run is not None:
                if not run.stop_requested:
                    run.stop_soon(f"{rec.desired_state} requested")
                continue  # started again once the old process is gone
            if rec.desired_state == "reissue_qr":
                paths = instance_paths(config.instances_dir, rec.bot_id)
                await trio.to_thread.run_sync(_forget_login, paths.data)
                rec = await ledger.update(rec.bot_id, reset_for_reissue)
            else:
                rec = await ledger.update(rec.bot_id, reset_for_restart)
        if rec.desired_state == "running":
            if run is None and rec.status != "failed" and not in_backoff(rec, now):
                if rec.pid is not None:
                    await recover_orphan(ledger, rec, config=config)
                start(rec.bot_id)
        elif run is not None and not run.stop_requested:
            run.stop_soon("stop requested")


async def recover_orphans(ledger: BotLedger, runs: Mapping[str, BotRun], *, config: SupervisorConfig) -> None:
    """At start-up: stop processes an earlier supervisor left behind (pid and start time checked)."""
    for rec in await ledger.store.list_bots():
        if rec.pid is not None and rec.bot_id not in runs:
            await recover_orphan(ledger, rec, config=config)


async def recover_orphan(ledger: BotLedger, rec: BotRecord, *, config: SupervisorConfig) -> None:
    """Stop the recorded process (pid and start time checked), sweep its process group, forget its pid."""
    assert rec.pid is not None
    # The bot's own environment entry: what proves a grandchild ours once its leader is gone.
    marker = f"IM_GATEWAY_DATA_DIR={instance_paths(config.instances_dir, rec.bot_id).data}".encode()
    outcome, swept = await trio.to_thread.run_sync(
        lambda: stop_orphan_tree(rec.pid or 0, rec.process_started_at, marker=marker, term_wait=config.orphan_term_wait)
    )
    await ledger.emit(
        rec.bot_id,
        [Status(kind="orphan_checked", label=outcome, detail={"pid": rec.pid, "swept": swept})],
    )

    def mark(r: BotRecord) -> BotRecord:
        status = "stopped" if r.status in ACTIVE else r.status
        return attrs.evolve(r, pid=None, process_started_at=None, status=status)

    await ledger.update(rec.bot_id, mark)


def _forget_login(data: Path) -> None:
    for name in LOGIN_STATE_FILES:
        (data / name).unlink(missing_ok=True)
