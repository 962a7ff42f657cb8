"""Bots in the browser: the FastAgent supervisor's records, live, and its four actions.

When the FastAgent plugin is installed, the server runs a supervisor in its
own nursery (unless another one, e.g. ``agentrt bots supervise``, already
holds the instances lock: then the page only changes desired states in the
shared store, and that supervisor acts on them).  Either way, the page learns
of changes from a sink on the supervisor (immediately) and from a poll of the
store (for changes made by other processes).

Only public fields of a record reach the browser: never its ``config``
(which may hold a sandbox API key) and never the QR URL as text; the QR code
is drawn on the server as SVG, from a URL that passed the FastAgent QR
validator, and served with ``Cache-Control: no-store``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from agentrt.bots import BotRecord, QrReissuer
from agentrt.errors import AgentrtError
from agentrt.events import EventBatch, Lifecycle, StateChanged

from ._hub import Hub, sse_frame

__all__ = ["BotManager", "public_bot", "STATE_CLASSES", "ACTIONS"]

#: The four actions a bot page offers.
ACTIONS = ("start", "stop", "restart", "reissue-qr")
#: Badge colour class per status.
STATE_CLASSES = {
    "running": "ok", "waiting_for_qr": "wait", "starting": "wait", "stopping": "wait", "degraded": "warn",
    "failed": "bad", "stopped": "off",
}  # fmt: skip
_POLL = 1.0
_REISSUE_WAIT = 15.0


def qr_url_of(rec: BotRecord) -> str | None:
    """The bot's login URL if it is waiting for a QR scan and the URL passes the validator."""
    from agentrt_fastagent.api import normalize_qr_url

    if rec.status != "waiting_for_qr":
        return None
    url: str | None = normalize_qr_url(rec.last_qr_code_url)
    return url


def public_bot(rec: BotRecord) -> dict[str, Any]:
    """The fields of a record the browser may see."""
    has_qr = False
    try:
        has_qr = qr_url_of(rec) is not None
    except ImportError:
        pass
    return {
        "bot_id": rec.bot_id,
        "status": rec.status,
        "desired_state": rec.desired_state,
        "restart_count": rec.restart_count,
        "backoff_until": rec.backoff_until,
        "pid": rec.pid,
        "last_error_code": rec.last_error_code,
        "last_error_message": (rec.last_error_message or "")[:300] or None,
        "qr_code_id": rec.last_qr_code_id if has_qr else None,
        "has_qr": has_qr,
        "account_id": rec.account_id,
        "model": rec.model,
        "updated_at": rec.updated_at,
        "badge": STATE_CLASSES.get(rec.status, "off"),
    }


class _BotSink:
    """Supervisor sink: a batch for a bot makes the page refresh that bot."""

    name = "web-bots"
    policy = "coalesce"
    buffer_size = 256

    def __init__(self, manager: BotManager) -> None:
        self.manager = manager

    async def handle(self, batch: EventBatch) -> None:
        if any(isinstance(e, (StateChanged, Lifecycle)) for e in batch.events):
            await self.manager.refresh(batch.source)

    async def aclose(self) -> None:
        """Nothing buffered."""


class BotManager:
    """The bots the page shows; runs the supervisor when it can."""

    def __init__(self, nursery: trio.Nursery, *, hub: Hub, env: Mapping[str, str], supervise: bool = True) -> None:
        self._nursery = nursery
        self.hub = hub
        self.env = dict(env)
        self.supervise = supervise
        self.available = False
        self.store: Any = None
        self.config: Any = None
        self.supervisor: Any = None
        #: Why there is no supervisor here ("" when there is one).
        self.mode = "unavailable"
        self._snapshot: dict[str, dict[str, Any]] = {}
        self._stop = trio.Event()
        self._stopped = trio.Event()

    async def start(self) -> None:
        """Load the bots configuration and start the supervisor (or the store poll only)."""
        try:
            from agentrt_fastagent.api import load_config, open_store
        except ImportError:
            self._stopped.set()
            return
        try:
            self.config = await trio.to_thread.run_sync(load_config, self.env)
            self.store, _kind = open_store(self.config, self.env)
        except AgentrtError as exc:
            print(f"agentrt web: bots unavailable: {exc.code}: {exc.detail}", file=sys.stderr)
            self._stopped.set()
            return
        self.available = True
        self.mode = "store"
        if self.supervise:
            try:
                await self._nursery.start(self._run_supervisor)
            except AgentrtError as exc:
                # Another supervisor owns the bots: act through the shared store.
                print(f"agentrt web: not supervising bots: {exc.code}", file=sys.stderr)
                self._stopped.set()
        else:
            self._stopped.set()
        self._nursery.start_soon(self._poll)

    async def _run_supervisor(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from agentrt import get_plugins
        from agentrt_fastagent.api import JsonFileBotStore, TimelineSink, open_supervisor

        cfg = self.config
        for name in cfg.bots:  # bots declared in the file exist in the store
            if await self.store.get_bot(name) is None:
                await self.store.save_bot(BotRecord(bot_id=name))
        sinks: list[Any] = [_BotSink(self)]
        factory = get_plugins().sink_for("recorder")
        if isinstance(self.store, JsonFileBotStore) or factory is None:
            sinks.append(TimelineSink(self.store))
        else:
            sinks.append(factory({"env": self.env}))
        try:
            async with open_supervisor(
                self.store, config=cfg.supervisor_config(self.env), resolve=cfg.resolver(self.env), sinks=sinks
            ) as sup:
                self.supervisor = sup
                self.mode = "supervisor"
                task_status.started()
                await self._stop.wait()
        finally:
            self.supervisor = None
            self._stopped.set()

    async def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                for rec in await self.store.list_bots():
                    self._publish_if_changed(rec)
            except Exception as exc:  # the page keeps its last view; say why once per failure
                print(f"agentrt web: bot store poll failed: {type(exc).__name__}", file=sys.stderr)
            with trio.move_on_after(_POLL):
                await self._stop.wait()

    def _publish_if_changed(self, rec: BotRecord) -> None:
        view = public_bot(rec)
        if self._snapshot.get(rec.bot_id) == view:
            return
        self._snapshot[rec.bot_id] = view
        frame = sse_frame({"t": time.time(), "bot": view})
        self.hub.publish("bots", frame)
        self.hub.publish(f"bot:{rec.bot_id}", frame)

    async def refresh(self, bot_id: str) -> None:
        """Re-read one bot and tell the pages if it changed."""
        if self.store is None:
            return
        rec = await self.store.get_bot(bot_id)
        if rec is not None:
            self._publish_if_changed(rec)

    async def list(self) -> Sequence[BotRecord]:
        """Every bot."""
        if self.store is None:
            return []
        bots: Sequence[BotRecord] = await self.store.list_bots()
        return bots

    async def get(self, bot_id: str) -> BotRecord:
        """One bot, or ``unknown_bot``."""
        rec: BotRecord | None = None if self.store is None else await self.store.get_bot(bot_id)
        if rec is None:
            raise AgentrtError("unknown_bot", "no such bot")
        return rec

    async def timeline(self, bot_id: str, offset: int, limit: int) -> Sequence[Mapping[str, Any]]:
        """A page of the bot's timeline."""
        rows: Sequence[Mapping[str, Any]] = await self.store.timeline(bot_id, offset=offset, limit=limit)
        return rows

    async def act(self, bot_id: str, action: str) -> None:
        """Run one of :data:`ACTIONS` on the bot."""
        rec = await self.get(bot_id)
        sup = self.supervisor
        if action == "start":
            await self._set(rec, lambda r: _want_running(r), sup and sup.request_start)
        elif action == "stop":
            await self._set(rec, lambda r: attrs.evolve(r, desired_state="stopped"), sup and sup.request_stop)
        elif action == "restart":
            await self._set(rec, lambda r: attrs.evolve(r, desired_state="restart"), sup and sup.request_restart)
        elif action == "reissue-qr":
            await self._reissue(rec)
        else:
            raise AgentrtError("unknown_action", "unknown bot action")
        await self.refresh(bot_id)

    async def _set(self, rec: BotRecord, change: Any, request: Any) -> None:
        if request:
            await request(rec.bot_id)
        else:
            await self.store.save_bot(change(rec))

    async def _reissue(self, rec: BotRecord) -> None:
        """Stop the bot, forget its weixin login, start it again: FastAgent then issues a fresh QR."""
        from agentrt_fastagent.api import DESIRED_STATES, LOGIN_STATE_FILES

        sup = self.supervisor
        if isinstance(sup, QrReissuer):
            await sup.request_qr_reissue(rec.bot_id)
            return
        if sup is None and "reissue_qr" in DESIRED_STATES:
            # The supervisor elsewhere reads this one-shot request from the shared store.
            await self.store.save_bot(attrs.evolve(rec, desired_state="reissue_qr"))
            return
        if sup is None:
            raise AgentrtError("supervisor_unavailable", "reissuing a QR code needs the supervisor in this server")
        # A supervisor without the one-shot request: do its steps from here.
        await sup.request_stop(rec.bot_id)
        with trio.move_on_after(_REISSUE_WAIT):
            while rec.bot_id in sup.live_bots():
                await sup.wait_reconciled()
        data = Path(self.config.instances_dir) / rec.bot_id / "data"
        for name in LOGIN_STATE_FILES:
            await trio.Path(data / name).unlink(missing_ok=True)
        fresh = await self.get(rec.bot_id)
        await self.store.save_bot(attrs.evolve(fresh, last_qr_code_url=None, last_qr_code_id=None, account_id=None))
        await sup.request_start(rec.bot_id)

    async def aclose(self) -> None:
        """Stop the supervisor (its bots get a requested stop; desired states are kept)."""
        self._stop.set()
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            await self._stopped.wait()


def _want_running(rec: BotRecord) -> BotRecord:
    if rec.status == "failed":
        return attrs.evolve(rec, desired_state="running", status="stopped", restart_count=0, backoff_until=None)
    return attrs.evolve(rec, desired_state="running")
