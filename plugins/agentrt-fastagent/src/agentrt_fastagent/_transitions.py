"""The bot record's transitions: pure functions of a record (and an event), no I/O.

The supervisor applies them inside its read-modify-write of the store
(:meth:`Supervisor._update`), so each one sees the freshest record.
"""

from __future__ import annotations

from typing import Any

import attrs

from agentrt.bots import BotRecord
from agentrt.events import Lifecycle, Status

from ._schema import normalize_qr_url
from ._skills import SyncResult

__all__ = [
    "ONE_SHOT",
    "ACTIVE",
    "QR_REJECTED",
    "lifecycle_change",
    "crash_plan",
    "is_requested",
    "in_backoff",
    "reason",
    "desired_running",
    "reset_for_restart",
    "reset_for_reissue",
    "mark_stopped",
    "sync_status",
]

#: Desired states that are one-shot requests, turned back into ``running`` once handled.
ONE_SHOT = ("restart", "reissue_qr")
#: Statuses of a bot whose process may be alive.
ACTIVE = frozenset({"starting", "waiting_for_qr", "running", "degraded", "stopping"})
#: Recorded when a QR code URL is refused.
QR_REJECTED = "Rejected untrusted QR code URL."


def lifecycle_change(
    r: BotRecord, ev: Lifecycle, now: float, *, backoff: tuple[float, ...], max_restarts: int
) -> BotRecord:
    """The record after lifecycle event ``ev`` (the reference supervisor's event → state rules)."""
    k = ev.kind
    data = ev.data
    if k == "process_started":
        return attrs.evolve(r, status="starting")
    if k == "qr_code":
        url = normalize_qr_url(data.get("qrCodeUrl"))
        if url is None:
            return attrs.evolve(r, last_error_code="INVALID_QR_URL", last_error_message=QR_REJECTED)
        qr_id = data.get("qrCodeId")
        return attrs.evolve(
            r, status="waiting_for_qr", last_qr_code_url=url,
            last_qr_code_id=qr_id if isinstance(qr_id, str) and qr_id else ev.timestamp,
        )  # fmt: skip
    if k == "login_confirmed":
        return attrs.evolve(r, account_id=data["accountId"])
    if k == "running":
        acct = data.get("accountId")
        return attrs.evolve(
            r, status="running", restart_count=0, backoff_until=None, last_error_code=None,
            last_error_message=None,
            account_id=acct if isinstance(acct, str) and acct else r.account_id,
        )  # fmt: skip
    if k == "account_invalid":
        return attrs.evolve(r, status="degraded")
    if k == "runtime_error":
        code, err = data.get("code"), data.get("error")
        return attrs.evolve(
            r,
            last_error_code=code if isinstance(code, str) and code else "RUNTIME_ERROR",
            last_error_message=err if isinstance(err, str) and err else ev.message,
        )
    if k == "stopping":
        if r.desired_state in ("stopped", *ONE_SHOT) or r.status == "stopping":
            return attrs.evolve(r, status="stopping")
        return r
    # stopped
    if is_requested(r):
        return attrs.evolve(r, status="stopped", pid=None, process_started_at=None)
    return crash_plan(r, ev.message, now, backoff=backoff, max_restarts=max_restarts)


def crash_plan(r: BotRecord, message: str, now: float, *, backoff: tuple[float, ...], max_restarts: int) -> BotRecord:
    """A crash: back off before the next start, or ``failed`` at the ``max_restarts``-th in a row."""
    count = r.restart_count
    nxt = count + 1
    if nxt >= max_restarts:
        return attrs.evolve(
            r, status="failed", restart_count=nxt, backoff_until=None, pid=None,
            process_started_at=None, last_error_code="RUNTIME_ERROR", last_error_message=message,
        )  # fmt: skip
    return attrs.evolve(
        r, status="stopped", restart_count=nxt, pid=None, process_started_at=None,
        backoff_until=now + backoff[min(count, len(backoff) - 1)],
    )  # fmt: skip


def is_requested(r: BotRecord) -> bool:
    """The record asks for the process to be down: an exit now is a stop, not a crash."""
    return r.desired_state in ("stopped", *ONE_SHOT) or r.status == "stopping"


def in_backoff(r: BotRecord, now: float) -> bool:
    """A crashed bot still waiting out its backoff."""
    return r.backoff_until is not None and now < r.backoff_until


def reason(r: BotRecord) -> str:
    """The reason a state change carries (the error code of a ``failed`` bot)."""
    if r.status in ("failed",) and r.last_error_code:
        return r.last_error_code
    return ""


def desired_running(r: BotRecord) -> BotRecord:
    """A start request (a ``failed`` bot is reset, as a user restart)."""
    if r.status == "failed":
        return attrs.evolve(r, desired_state="running", status="stopped", restart_count=0, backoff_until=None)
    return attrs.evolve(r, desired_state="running")


def reset_for_restart(r: BotRecord) -> BotRecord:
    """A restart request, once the old process is gone."""
    status = "stopped" if r.status in ("failed", *ACTIVE) else r.status
    return attrs.evolve(
        r, desired_state="running", status=status, restart_count=0, backoff_until=None, pid=None,
        process_started_at=None,
    )  # fmt: skip


def reset_for_reissue(r: BotRecord) -> BotRecord:
    """A QR reissue request, once the old process is gone: the login is forgotten too."""
    return attrs.evolve(reset_for_restart(r), last_qr_code_url=None, last_qr_code_id=None, account_id=None)


def mark_stopped(r: BotRecord) -> BotRecord:
    """Down, with no process recorded."""
    return attrs.evolve(r, status="stopped", pid=None, process_started_at=None)


def sync_status(result: SyncResult) -> Status:
    """The ``managed_skills_sync`` status event of one skills sync."""
    detail: dict[str, Any] = {
        "status": result.status,
        "installed": list(result.installed_skills),
        "updated": list(result.updated_skills),
        "removed": list(result.removed_skills),
        "repairedMarkers": list(result.repaired_markers),
        "skippedConflicts": list(result.skipped_conflicts),
        "cleanedDebris": list(result.cleaned_debris),
    }
    if result.error_code:
        detail["errorCode"] = result.error_code
        detail["error"] = result.error
    return Status(kind="managed_skills_sync", label=result.status, detail=detail)
