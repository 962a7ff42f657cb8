"""tune_malloc and the agentrt command's allocator settings (each in a fresh interpreter: they are process-wide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

glibc_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
    reason="tune_malloc sets glibc's allocator; elsewhere it changes nothing (the last test holds that it says so)",
)

# What a streaming host does per batch: a few medium buffers (the chunk read, its
# rendered output, a tool result's text) made, touched and freed together.
_PROBE = r"""
import json, resource, sys
mode = sys.argv[1]
applied = None
if mode == "tune":
    import agentrt
    applied = agentrt.tune_malloc()
elif mode == "cli":
    import agentrt._os.malloc_tuning as chosen
    from agentrt import cli
    calls = []
    real = chosen.tune_malloc
    chosen.tune_malloc = lambda: calls.append(1) or real()
    try:
        cli.main(["plugins", "--json"])
    except SystemExit:
        pass
    applied = len(calls)

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

start = faults()
for _ in range(40):
    batch = [b"x" * (1 << 20) for _ in range(4)]
    del batch
print(json.dumps({"applied": applied, "faults": faults() - start}))
"""

_PAGES_PER_BATCH = 4 * (1 << 20) // 4096


def _allowlisted_env() -> dict[str, str]:
    # The child interpreters get only what they need to find the venv, never the whole environment.
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV")}


def _probe(mode: str, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        capture_output=True,
        check=True,
        env={**_allowlisted_env(), **env},
        timeout=60,
    )
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


@glibc_only
def test_glibc_pages_a_batch_in_again_per_batch_and_tune_malloc_keeps_it() -> None:
    default = _probe("plain")
    tuned = _probe("tune")
    assert tuned["applied"] is True
    # glibc's own rules give the batch's memory back every time: each batch pages it in again.
    assert default["faults"] > 20 * _PAGES_PER_BATCH  # type: ignore[operator]
    # Tuned, the first batch pages it in and the others reuse it.
    assert tuned["faults"] < 3 * _PAGES_PER_BATCH  # type: ignore[operator]


@glibc_only
def test_the_agentrt_command_tunes_the_allocator_unless_told_not_to() -> None:
    tuned = _probe("cli")
    assert tuned["applied"] == 1
    assert tuned["faults"] < 3 * _PAGES_PER_BATCH  # type: ignore[operator]
    default = _probe("cli", AGENTRT_MALLOC="default")
    assert default["applied"] == 0


@glibc_only
@pytest.mark.parametrize(
    "setting", [{"MALLOC_TRIM_THRESHOLD_": "131072"}, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"}]
)
def test_the_users_own_allocator_settings_win(setting: dict[str, str]) -> None:
    got = _probe("tune", **setting)
    assert got["applied"] is False
    assert got["faults"] > 20 * _PAGES_PER_BATCH  # type: ignore[operator]


def test_off_linux_tune_malloc_changes_nothing_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentrt import tune_malloc

    monkeypatch.setattr(sys, "platform", "darwin")
    assert tune_malloc() is False
