"""Managed skills: sync the bundled skills into ``<data>/skills/`` before a start.

The algorithm follows the reference supervisor, with agentrt's file names:

* bundle: ``skills/managed/manifest.json`` in this package,
  ``{"version": str, "skills": [{"name": str, "path": str}]}``; a name is one
  directory name, unique; a path is relative, stays inside the bundle (after
  resolving symlinks) and its tree holds no symlink;
* ownership: ``<data>/skills/<name>/.agentrt-managed-skill.json`` (the
  marker) says "ours"; failing that, the previous summary listing the name
  says "ours" (and the marker is repaired); anything else is the user's and is
  skipped, never overwritten (``skipped_conflicts``);
* install/update: copy into a staging directory made inside ``<data>/skills``
  (same filesystem, so the final rename is atomic), write the marker, swap it
  into place (an existing copy is moved aside and restored on failure);
* debris: a sync that died half-way leaves staging directories and
  ``<name>.backup-<hex>`` copies behind; the next sync (holding the lock, so no
  other sync is running) removes the staging directories and puts a backup back
  where its skill is missing (the crash fell between the two renames) or
  removes it where the skill is in place;
* ``<data>/skills`` itself must be a real directory: a symlink there would
  send every write elsewhere, so the sync refuses (``SKILLS_DIR_IS_SYMLINK``);
* retire: a skill that is ours but no longer in the bundle is removed;
* summary: ``<data>/.agentrt-managed-skills.json``, written atomically;
* lock: ``<data>/.agentrt-managed-skills.lock`` created with ``O_EXCL``
  holding the owner's pid and start time; a lock whose owner is gone (or whose
  pid now names another process) is stale and removed; a live one gives
  status ``busy`` (``SYNC_IN_PROGRESS``).

Every function here blocks; the supervisor calls :func:`sync_managed_skills`
through ``trio.to_thread.run_sync``.  A failed sync never blocks a start.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ._skills_files import acquire_lock, read_json, write_json_atomic
from ._skills_files import now as _timestamp

__all__ = [
    "MARKER_NAME",
    "SUMMARY_NAME",
    "LOCK_NAME",
    "SyncResult",
    "default_bundle_dir",
    "sync_managed_skills",
]

MARKER_NAME = ".agentrt-managed-skill.json"
SUMMARY_NAME = ".agentrt-managed-skills.json"
LOCK_NAME = ".agentrt-managed-skills.lock"
_STAGING_PREFIX = ".agentrt-managed-skill-"
_BACKUP_NAME = re.compile(r"(.+)\.backup-[0-9a-f]{32}")
SCHEMA_VERSION = 1


@attrs.frozen(kw_only=True)
class SyncResult:
    """What one sync did.  ``status`` is ``success``, ``busy`` or ``error``."""

    status: Literal["success", "busy", "error"]
    error_code: str | None = None
    error: str | None = None
    bundle_version: str | None = None
    installed_skills: tuple[str, ...] = ()
    updated_skills: tuple[str, ...] = ()
    removed_skills: tuple[str, ...] = ()
    repaired_markers: tuple[str, ...] = ()
    skipped_conflicts: tuple[str, ...] = ()
    metadata_repaired: bool = False
    cleaned_debris: tuple[str, ...] = ()
    """Staging and backup directories an interrupted sync left behind, removed or restored."""


class _SyncError(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def default_bundle_dir() -> Path:
    """The bundle shipped inside this package."""
    return Path(__file__).resolve().parent / "skills" / "managed"


# -- manifest -------------------------------------------------------------


def _load_manifest(bundle: Path) -> tuple[str, list[tuple[str, Path]]]:
    manifest = read_json(bundle / "manifest.json")
    if not isinstance(manifest, Mapping):
        raise _SyncError("MANIFEST_INVALID", "manifest.json is missing or not a JSON object")
    version = manifest.get("version")
    skills = manifest.get("skills")
    if not isinstance(version, str) or not version:
        raise _SyncError("MANIFEST_INVALID", "manifest version must be a non-empty string")
    if not isinstance(skills, list):
        raise _SyncError("MANIFEST_INVALID", "manifest skills must be a list")
    root = bundle.resolve()
    seen: set[str] = set()
    out: list[tuple[str, Path]] = []
    for entry in skills:
        if not isinstance(entry, Mapping):
            raise _SyncError("MANIFEST_INVALID", "each skill must be an object")
        name, rel = entry.get("name"), entry.get("path")
        if (
            not isinstance(name, str)
            or not name
            or name in {".", ".."}
            or name.startswith(".")
            or "/" in name
            or "\\" in name
            or "\0" in name
        ):
            raise _SyncError("MANIFEST_INVALID", f"skill name {name!r} is not a single directory name")
        if name in seen:
            raise _SyncError("MANIFEST_INVALID", f"skill name {name!r} appears twice")
        seen.add(name)
        if not isinstance(rel, str) or not rel or os.path.isabs(rel) or "\0" in rel:
            raise _SyncError("MANIFEST_INVALID", f"skill {name!r} path must be relative")
        src = (root / rel).resolve()
        if src == root or root not in src.parents:
            raise _SyncError("MANIFEST_INVALID", f"skill {name!r} path escapes the bundle")
        if not src.is_dir():
            raise _SyncError("MANIFEST_INVALID", f"skill {name!r} path is not a directory")
        for dirpath, dirnames, filenames in os.walk(src):
            for item in (*dirnames, *filenames):
                if os.path.islink(os.path.join(dirpath, item)):
                    raise _SyncError("MANIFEST_INVALID", f"skill {name!r} contains a symlink")
        out.append((name, src))
    return version, out


# -- ownership ------------------------------------------------------------


def _marker_ok(target: Path, name: str) -> bool:
    marker = read_json(target / MARKER_NAME)
    return (
        isinstance(marker, Mapping)
        and marker.get("skillName") == name
        and marker.get("schemaVersion") == SCHEMA_VERSION
    )


def _marker(name: str, version: str, managed_at: str) -> dict[str, Any]:
    return {
        "bundleVersion": version,
        "managedAt": managed_at,
        "schemaVersion": SCHEMA_VERSION,
        "skillName": name,
    }


def _install(src: Path, skills_dir: Path, name: str, version: str, managed_at: str) -> None:
    target = skills_dir / name
    staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{name}-", dir=skills_dir))
    try:
        shutil.copytree(src, staging, dirs_exist_ok=True, symlinks=False)
        write_json_atomic(staging / MARKER_NAME, _marker(name, version, managed_at))
        if target.exists() or target.is_symlink():
            backup = skills_dir / f"{name}.backup-{uuid.uuid4().hex}"
            os.rename(target, backup)
            try:
                os.rename(staging, target)
            except BaseException:
                os.rename(backup, target)
                raise
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.rename(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _clean_debris(skills_dir: Path, names: set[str]) -> list[str]:
    """Remove what an interrupted sync left in ``skills_dir``; put back a backup whose skill is gone.

    Only names this module makes are touched: staging directories (our prefix)
    and backups of skills that are ours (in the bundle or the last summary).
    """
    cleaned: list[str] = []
    for child in sorted(skills_dir.iterdir()):
        if child.is_symlink() or not child.is_dir():
            continue
        backup = _BACKUP_NAME.fullmatch(child.name)
        if child.name.startswith(_STAGING_PREFIX):
            shutil.rmtree(child)
        elif backup is not None and backup.group(1) in names:
            target = skills_dir / backup.group(1)
            if target.exists() or target.is_symlink():
                shutil.rmtree(child)
            else:
                # The crash fell between "move the old copy aside" and "move the new one in".
                os.rename(child, target)
        else:
            continue
        cleaned.append(child.name)
    return cleaned


def _previous_managed(summary: Any) -> tuple[dict[str, Mapping[str, Any]], bool]:
    """Names listed in the previous summary, and whether it was unreadable."""
    if summary is None:
        return {}, False
    if not isinstance(summary, Mapping) or not isinstance(summary.get("managedSkills"), list):
        return {}, True
    out: dict[str, Mapping[str, Any]] = {}
    for item in summary["managedSkills"]:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            out[item["name"]] = item
    return out, False


def sync_managed_skills(data_dir: Path, bundle_dir: Path | None = None) -> SyncResult:
    """Sync the managed bundle into ``data_dir/skills``; never raises for sync failures."""
    data_dir = Path(data_dir)
    bundle = Path(bundle_dir) if bundle_dir is not None else default_bundle_dir()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return SyncResult(status="error", error_code="SYNC_FAILED", error=f"data dir: {exc.strerror}")
    lock = data_dir / LOCK_NAME
    if not acquire_lock(lock):
        return SyncResult(status="busy", error_code="SYNC_IN_PROGRESS", error="another managed-skills sync is running")
    try:
        return _sync_locked(data_dir, bundle)
    finally:
        lock.unlink(missing_ok=True)


def _sync_locked(data_dir: Path, bundle: Path) -> SyncResult:
    summary_path = data_dir / SUMMARY_NAME
    skills_dir = data_dir / "skills"
    previous_summary = read_json(summary_path) if summary_path.exists() else None
    previous, metadata_repaired = _previous_managed(previous_summary)
    if summary_path.exists() and previous_summary is None:
        metadata_repaired = True
    now = _timestamp()
    try:
        version, manifest = _load_manifest(bundle)
    except _SyncError as exc:
        # Keep the previous snapshot: a broken bundle must not make us forget what is ours.
        _write_summary(
            summary_path, previous_summary, previous, status="error", error=exc.code, now=now,
            operation="sync-all-managed",
        )  # fmt: skip
        return SyncResult(status="error", error_code=exc.code, error=exc.detail)
    if skills_dir.is_symlink():
        _write_summary(
            summary_path, previous_summary, previous, status="error", error="SKILLS_DIR_IS_SYMLINK", now=now,
            operation="sync-all-managed", version=version,
        )  # fmt: skip
        return SyncResult(
            status="error", error_code="SKILLS_DIR_IS_SYMLINK",
            error=f"{skills_dir} is a symbolic link: refusing to write through it", bundle_version=version,
        )  # fmt: skip
    installed: list[str] = []
    updated: list[str] = []
    removed: list[str] = []
    repaired: list[str] = []
    conflicts: list[str] = []
    managed: dict[str, dict[str, Any]] = {}
    cleaned: list[str] = []
    try:
        skills_dir.mkdir(parents=True, exist_ok=True)
        wanted = {name for name, _ in manifest}
        cleaned = _clean_debris(skills_dir, wanted | set(previous))
        for name, src in manifest:
            target = skills_dir / name
            exists = target.exists() or target.is_symlink()
            if exists and not target.is_symlink() and target.is_dir() and _marker_ok(target, name):
                pass
            elif exists and name in previous and target.is_dir() and not target.is_symlink():
                repaired.append(name)
            elif exists:
                conflicts.append(name)
                continue
            _install(src, skills_dir, name, version, now)
            (updated if exists else installed).append(name)
            managed[name] = {"bundleVersion": version, "managedAt": now, "name": name}
        # Retire: ours (marker, or listed in the last summary) but gone from the bundle.
        candidates = set(previous)
        for child in skills_dir.iterdir():
            if child.name.startswith(".") or child.is_symlink() or not child.is_dir():
                continue
            if _marker_ok(child, child.name):
                candidates.add(child.name)
        for name in sorted(candidates - wanted):
            target = skills_dir / name
            if target.is_symlink() or not target.is_dir():
                continue
            if not _marker_ok(target, name):
                if name not in previous:
                    continue
                repaired.append(name)
                write_json_atomic(target / MARKER_NAME, _marker(name, version, now))
            shutil.rmtree(target)
            removed.append(name)
    except OSError as exc:
        _write_summary(
            summary_path, previous_summary, {**previous, **managed}, status="error", error="SYNC_FAILED",
            now=now, operation="sync-all-managed", version=version, conflicts=conflicts,
        )  # fmt: skip
        return SyncResult(status="error", error_code="SYNC_FAILED", error=f"{type(exc).__name__}: {exc}")
    try:
        _write_summary(
            summary_path, previous_summary, managed, status="success", error=None, now=now,
            operation="sync-all-managed", version=version, conflicts=conflicts,
        )  # fmt: skip
    except OSError as exc:
        return SyncResult(
            status="error", error_code="METADATA_WRITE_FAILED", error=str(exc.strerror),
            bundle_version=version, installed_skills=tuple(installed), updated_skills=tuple(updated),
            removed_skills=tuple(removed), repaired_markers=tuple(repaired),
            skipped_conflicts=tuple(conflicts), metadata_repaired=metadata_repaired,
            cleaned_debris=tuple(cleaned),
        )  # fmt: skip
    return SyncResult(
        status="success", bundle_version=version, installed_skills=tuple(installed),
        updated_skills=tuple(updated), removed_skills=tuple(removed), repaired_markers=tuple(repaired),
        skipped_conflicts=tuple(conflicts), metadata_repaired=metadata_repaired, cleaned_debris=tuple(cleaned),
    )  # fmt: skip


def _write_summary(
    path: Path,
    previous_summary: Any,
    managed: Mapping[str, Mapping[str, Any]],
    *,
    status: str,
    error: str | None,
    now: str,
    operation: str,
    version: str | None = None,
    conflicts: list[str] | None = None,
) -> None:
    prev = previous_summary if isinstance(previous_summary, Mapping) else {}
    summary = {
        "bundleVersion": version if version is not None else prev.get("bundleVersion"),
        "lastError": error,
        "lastOperation": operation,
        "lastSyncedAt": now,
        "lastSyncStatus": status,
        "managedSkills": [
            {
                "bundleVersion": item.get("bundleVersion"),
                "managedAt": item.get("managedAt"),
                "name": name,
            }
            for name, item in sorted(managed.items())
        ],
        "schemaVersion": SCHEMA_VERSION,
        "skippedConflicts": sorted(conflicts if conflicts is not None else prev.get("skippedConflicts", [])),
    }
    write_json_atomic(path, summary)
