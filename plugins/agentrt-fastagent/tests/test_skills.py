"""Managed-skills sync: install, update, user conflicts, retire, repair, bad manifests, the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agentrt_fastagent._procinfo import process_start_time
from agentrt_fastagent._skills import (
    LOCK_NAME,
    MARKER_NAME,
    SUMMARY_NAME,
    default_bundle_dir,
    sync_managed_skills,
)

from .conftest import make_binary


def bundle(root: Path, version: str, skills: dict[str, str], manifest: object = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, body in skills.items():
        (root / name).mkdir(exist_ok=True)
        (root / name / "SKILL.md").write_text(body)
    if manifest is None:
        manifest = {"version": version, "skills": [{"name": n, "path": n} for n in skills]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def summary(data: Path) -> dict:
    return json.loads((data / SUMMARY_NAME).read_text())


def test_packaged_bundle_is_valid(tmp_path: Path) -> None:
    result = sync_managed_skills(tmp_path / "data")
    manifest = json.loads((default_bundle_dir() / "manifest.json").read_text())
    assert result.status == "success"
    assert sorted(result.installed_skills) == sorted(s["name"] for s in manifest["skills"])
    for name in result.installed_skills:
        assert (tmp_path / "data" / "skills" / name / "SKILL.md").is_file()


def test_install_then_update(tmp_path: Path) -> None:
    data = tmp_path / "data"
    b = bundle(tmp_path / "b1", "1", {"alpha": "v1", "beta": "v1"})
    r1 = sync_managed_skills(data, b)
    assert r1.status == "success" and r1.installed_skills == ("alpha", "beta") and r1.updated_skills == ()
    marker = json.loads((data / "skills" / "alpha" / MARKER_NAME).read_text())
    assert marker["skillName"] == "alpha" and marker["bundleVersion"] == "1" and marker["schemaVersion"] == 1
    s = summary(data)
    assert [m["name"] for m in s["managedSkills"]] == ["alpha", "beta"]
    assert s["lastSyncStatus"] == "success" and s["bundleVersion"] == "1" and s["schemaVersion"] == 1
    b2 = bundle(tmp_path / "b2", "2", {"alpha": "v2", "beta": "v2"})
    (data / "skills" / "alpha" / "stale.txt").write_text("old file of ours")
    r2 = sync_managed_skills(data, b2)
    assert r2.updated_skills == ("alpha", "beta") and r2.installed_skills == ()
    assert (data / "skills" / "alpha" / "SKILL.md").read_text() == "v2"
    assert not (data / "skills" / "alpha" / "stale.txt").exists()
    leftovers = [p.name for p in (data / "skills").iterdir() if p.name.startswith(".") or "backup" in p.name]
    assert leftovers == []
    assert not (data / LOCK_NAME).exists()


def test_user_directory_is_never_overwritten(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "skills" / "alpha").mkdir(parents=True)
    (data / "skills" / "alpha" / "SKILL.md").write_text("mine")
    r = sync_managed_skills(data, bundle(tmp_path / "b", "1", {"alpha": "ours", "beta": "ours"}))
    assert r.status == "success" and r.skipped_conflicts == ("alpha",) and r.installed_skills == ("beta",)
    assert (data / "skills" / "alpha" / "SKILL.md").read_text() == "mine"
    assert not (data / "skills" / "alpha" / MARKER_NAME).exists()
    assert summary(data)["skippedConflicts"] == ["alpha"]
    # and a later sync leaves it alone too (it never became ours)
    r = sync_managed_skills(data, bundle(tmp_path / "b2", "2", {"beta": "ours"}))
    assert r.removed_skills == () and (data / "skills" / "alpha" / "SKILL.md").read_text() == "mine"


def test_retire_removes_only_ours(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sync_managed_skills(data, bundle(tmp_path / "b1", "1", {"alpha": "a", "beta": "b"}))
    (data / "skills" / "user-thing").mkdir()
    r = sync_managed_skills(data, bundle(tmp_path / "b2", "2", {"alpha": "a2"}))
    assert r.removed_skills == ("beta",) and not (data / "skills" / "beta").exists()
    assert (data / "skills" / "user-thing").is_dir()
    assert [m["name"] for m in summary(data)["managedSkills"]] == ["alpha"]


def test_metadata_only_retire_and_marker_repair(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sync_managed_skills(data, bundle(tmp_path / "b1", "1", {"alpha": "a", "beta": "b"}))
    # markers lost (e.g. copied by hand): the summary still says they are ours
    (data / "skills" / "alpha" / MARKER_NAME).unlink()
    (data / "skills" / "beta" / MARKER_NAME).unlink()
    r = sync_managed_skills(data, bundle(tmp_path / "b2", "2", {"alpha": "a2"}))
    assert set(r.repaired_markers) == {"alpha", "beta"}
    assert r.updated_skills == ("alpha",) and r.removed_skills == ("beta",)
    assert (data / "skills" / "alpha" / MARKER_NAME).is_file()


def test_summary_lost_markers_are_truth(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sync_managed_skills(data, bundle(tmp_path / "b1", "1", {"alpha": "a", "beta": "b"}))
    (data / SUMMARY_NAME).write_text("{not json")
    r = sync_managed_skills(data, bundle(tmp_path / "b2", "2", {"alpha": "a2"}))
    assert r.metadata_repaired and r.updated_skills == ("alpha",) and r.removed_skills == ("beta",)
    assert summary(data)["lastSyncStatus"] == "success"


@pytest.mark.parametrize(
    "manifest",
    [
        "not an object",
        {"version": "", "skills": []},
        {"version": "1", "skills": {}},
        {"version": "1", "skills": [{"name": "../x", "path": "alpha"}]},
        {"version": "1", "skills": [{"name": "a/b", "path": "alpha"}]},
        {"version": "1", "skills": [{"name": ".hidden", "path": "alpha"}]},
        {"version": "1", "skills": [{"name": "alpha", "path": "alpha"}, {"name": "alpha", "path": "alpha"}]},
        {"version": "1", "skills": [{"name": "alpha", "path": "/etc"}]},
        {"version": "1", "skills": [{"name": "alpha", "path": "../outside"}]},
        {"version": "1", "skills": [{"name": "alpha", "path": "."}]},
        {"version": "1", "skills": [{"name": "alpha", "path": "missing"}]},
        {"version": "1", "skills": [{"name": "alpha", "path": "escape-link"}]},
    ],
)
def test_invalid_manifest_keeps_the_snapshot(tmp_path: Path, manifest: object) -> None:
    data = tmp_path / "data"
    sync_managed_skills(data, bundle(tmp_path / "good", "1", {"alpha": "a"}))
    (tmp_path / "outside").mkdir()
    bad = bundle(tmp_path / "bad", "2", {"alpha": "evil"}, manifest=manifest)
    (bad / "escape-link").symlink_to(tmp_path / "outside")
    r = sync_managed_skills(data, bad)
    assert r.status == "error" and r.error_code == "MANIFEST_INVALID"
    s = summary(data)
    assert s["lastSyncStatus"] == "error" and s["lastError"] == "MANIFEST_INVALID"
    assert [m["name"] for m in s["managedSkills"]] == ["alpha"]
    assert (data / "skills" / "alpha" / "SKILL.md").read_text() == "a"


def test_symlink_inside_a_skill_is_rejected(tmp_path: Path) -> None:
    b = bundle(tmp_path / "b", "1", {"alpha": "a"})
    (b / "alpha" / "passwd").symlink_to("/etc/passwd")
    r = sync_managed_skills(tmp_path / "data", b)
    assert r.error_code == "MANIFEST_INVALID" and not (tmp_path / "data" / "skills" / "alpha").exists()


def test_busy_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / LOCK_NAME).write_text(json.dumps({"pid": os.getpid(), "startedAt": process_start_time(os.getpid())}))
    r = sync_managed_skills(data, bundle(tmp_path / "b", "1", {"alpha": "a"}))
    assert r.status == "busy" and r.error_code == "SYNC_IN_PROGRESS"
    assert (data / LOCK_NAME).exists() and not (data / "skills").exists()


@pytest.mark.parametrize("content", ["garbage", "{}", "dead", "reused"])
def test_stale_lock_is_broken(tmp_path: Path, content: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    if content == "dead":
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        content = json.dumps({"pid": child.pid, "startedAt": "2020-01-01T00:00:00.00Z"})
    elif content == "reused":  # our own pid, but a different start time: not the owner
        content = json.dumps({"pid": os.getpid(), "startedAt": "2020-01-01T00:00:00.00Z"})
    (data / LOCK_NAME).write_text(content)
    r = sync_managed_skills(data, bundle(tmp_path / "b", "1", {"alpha": "a"}))
    assert r.status == "success" and r.installed_skills == ("alpha",)
    assert not (data / LOCK_NAME).exists()


async def test_sync_runs_before_start_and_failure_does_not_block(tmp_path: Path, sup_factory, store, recorder) -> None:
    bad = bundle(tmp_path / "bad", "1", {"alpha": "a"}, manifest={"version": 1})
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy"), skills_bundle=bad) as sup:
        await sup.add_bot("b1")
        data = tmp_path / "instances" / "b1" / "data"
        await trio.Path(data / "skills" / "mine").mkdir(parents=True)
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
    (sync,) = [e for e in recorder.events("b1") if getattr(e, "kind", "") == "managed_skills_sync"]
    assert sync.label == "error" and sync.detail["errorCode"] == "MANIFEST_INVALID"
    assert (data / "skills" / "mine").is_dir()
    # the sync event precedes the process' first event
    kinds = [getattr(e, "kind", None) for e in recorder.events("b1")]
    assert kinds.index("managed_skills_sync") < kinds.index("process_started")


async def test_busy_sync_does_not_block_start(tmp_path: Path, sup_factory, store, recorder) -> None:
    data = tmp_path / "instances" / "b1" / "data"
    data.mkdir(parents=True)
    (data / LOCK_NAME).write_text(json.dumps({"pid": os.getpid(), "startedAt": process_start_time(os.getpid())}))
    async with sup_factory(make_binary(tmp_path / "bin", "restored_happy")) as sup:
        await sup.add_bot("b1")
        await sup.request_start("b1")
        await recorder.wait_state("b1", "running")
    (sync,) = [e for e in recorder.events("b1") if getattr(e, "kind", "") == "managed_skills_sync"]
    assert sync.label == "busy" and sync.detail["errorCode"] == "SYNC_IN_PROGRESS"


def test_metadata_write_failure_is_reported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / SUMMARY_NAME).mkdir(parents=True)  # a directory where the summary file should go
    r = sync_managed_skills(data, bundle(tmp_path / "b", "1", {"alpha": "a"}))
    assert r.status == "error" and r.error_code == "METADATA_WRITE_FAILED"
    assert r.installed_skills == ("alpha",)  # the skills themselves were synced
    assert (data / "skills" / "alpha" / MARKER_NAME).is_file()
    assert not (data / LOCK_NAME).exists()
    assert [p.name for p in data.iterdir() if p.name.endswith(".tmp")] == []


def test_update_failure_restores_the_previous_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import agentrt_fastagent._skills as skills

    data = tmp_path / "data"
    sync_managed_skills(data, bundle(tmp_path / "b1", "1", {"alpha": "v1"}))
    real_rename = os.rename

    def failing_rename(src, dst):
        if ".agentrt-managed-skill-" in str(src):
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(skills.os, "rename", failing_rename)
    r = sync_managed_skills(data, bundle(tmp_path / "b2", "2", {"alpha": "v2"}))
    assert r.status == "error" and r.error_code == "SYNC_FAILED"
    assert (data / "skills" / "alpha" / "SKILL.md").read_text() == "v1"
    assert sorted(p.name for p in (data / "skills").iterdir()) == ["alpha"]


_CRASHING_SYNC = r"""
import os, sys
from pathlib import Path
import agentrt_fastagent._skills as skills
point, real = sys.argv[3], os.rename
def rename(src, dst):
    if point == "staged" and ".backup-" in str(dst):
        os._exit(9)  # the new copy is staged; the old one is still in place
    if point == "moved_aside" and ".agentrt-managed-skill-" in str(src):
        os._exit(9)  # the old copy is aside; the new one is not yet in place
    real(src, dst)
skills.os.rename = rename
skills.sync_managed_skills(Path(sys.argv[1]), Path(sys.argv[2]))
"""


@pytest.mark.parametrize("point", ["staged", "moved_aside"])
def test_sync_cleans_the_debris_of_a_crashed_sync(tmp_path: Path, point: str) -> None:
    data = tmp_path / "data"
    sync_managed_skills(data, bundle(tmp_path / "b1", "1", {"alpha": "v1", "beta": "v1"}))
    b2 = bundle(tmp_path / "b2", "2", {"alpha": "v2", "beta": "v2"})
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASHING_SYNC, str(data), str(b2), point],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, capture_output=True, timeout=60,
    )  # fmt: skip
    assert crashed.returncode == 9, crashed.stderr.decode()
    debris = sorted(p.name for p in (data / "skills").iterdir() if p.name not in ("alpha", "beta"))
    # what the crash left: a staging directory, and alpha's backup where alpha itself is gone
    assert len(debris) == (1 if point == "staged" else 2) and debris[0].startswith(".agentrt-managed-skill-alpha-")
    r = sync_managed_skills(data, b2)
    assert r.status == "success" and r.cleaned_debris == tuple(debris)
    assert r.updated_skills == ("alpha", "beta") and r.installed_skills == ()  # the backup was put back first
    assert sorted(p.name for p in (data / "skills").iterdir()) == ["alpha", "beta"]
    assert (data / "skills" / "alpha" / "SKILL.md").read_text() == "v2"
    assert not (data / LOCK_NAME).exists()  # the dead owner's lock was stale and broken


def test_sync_leaves_other_backup_names_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    user = data / "skills" / f"mine.backup-{'0' * 32}"  # not a skill of ours: the user's directory
    user.mkdir(parents=True)
    r = sync_managed_skills(data, bundle(tmp_path / "b", "1", {"alpha": "a"}))
    assert r.status == "success" and r.cleaned_debris == () and user.is_dir()


def test_skills_dir_symlink_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    outside = tmp_path / "outside"
    outside.mkdir()
    data.mkdir()
    (data / "skills").symlink_to(outside)
    r = sync_managed_skills(data, bundle(tmp_path / "b", "1", {"alpha": "a"}))
    assert r.status == "error" and r.error_code == "SKILLS_DIR_IS_SYMLINK"
    assert "symbolic link" in (r.error or "")
    assert list(outside.iterdir()) == []  # nothing was written through the link
    assert summary(data)["lastError"] == "SKILLS_DIR_IS_SYMLINK"
    assert not (data / LOCK_NAME).exists()
