"""Managed skills' files: atomic JSON writes, tolerant reads and the sync lock.

Kept apart from the sync itself (``_skills``) so each stays small; nothing
here knows about bundles or markers.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._procinfo import process_start_time

__all__ = ["acquire_lock", "now", "read_json", "write_json_atomic"]


def now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def write_json_atomic(path: Path, data: Any) -> None:
    # Atomic (readers see the old or the new file), not fsynced: an fsync per
    # file tripled the sync's cost, and everything here is rebuilt by the next
    # sync (markers are re-derived, the summary is diagnostic).
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


# -- lock ---------------------------------------------------------------


def acquire_lock(path: Path) -> bool:
    """Take the lock; False when a live owner holds it.  Stale locks are broken once."""
    me = {"pid": os.getpid(), "startedAt": process_start_time(os.getpid())}
    for _attempt in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if _lock_is_stale(path):
                path.unlink(missing_ok=True)
                continue
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(me, fh)
        return True
    return False


def _lock_is_stale(path: Path) -> bool:
    owner = read_json(path)
    if not isinstance(owner, Mapping):
        return True
    pid, started = owner.get("pid"), owner.get("startedAt")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True
    current = process_start_time(pid)
    return current is None or current != started
