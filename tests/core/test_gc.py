"""tune_gc and the agentrt command's collector settings (each in a fresh interpreter: they are process-wide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PROBE = r"""
import gc, json, sys
before = gc.get_threshold()
mode = sys.argv[1]
if mode == "tune":
    import agentrt
    previous = agentrt.tune_gc()
    again = agentrt.tune_gc(5)  # never lowers what is set
elif mode == "cli":
    from agentrt import cli
    try:
        cli.main(["plugins", "--json"])
    except SystemExit:
        pass
    previous = again = None
print(json.dumps({"before": before, "previous": previous, "again": again,
                  "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def _allowlisted_env() -> dict[str, str]:
    # The child interpreters get only what they need to find the venv, never the whole environment.
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV")}


def _probe(mode: str, **env: str) -> dict[str, object]:
    base = _allowlisted_env()
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, check=True, env={**base, **env}, timeout=60
    )
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def test_tune_gc_freezes_and_raises_the_young_threshold() -> None:
    from agentrt._os.gc_tuning import STREAMING_GEN0_THRESHOLD

    got = _probe("tune")
    assert got["previous"] == got["before"]
    after = got["after"]
    assert isinstance(after, list) and after[0] == STREAMING_GEN0_THRESHOLD
    assert after[1:] == got["before"][1:]  # type: ignore[index]
    assert got["again"] == after  # the second call saw the first's settings and kept them
    assert isinstance(got["frozen"], int) and got["frozen"] > 1000


def test_tune_gc_refuses_a_nonsense_threshold() -> None:
    from agentrt import tune_gc

    with pytest.raises(ValueError):
        tune_gc(0)


def test_the_agentrt_command_tunes_the_collector_unless_told_not_to() -> None:
    from agentrt._os.gc_tuning import STREAMING_GEN0_THRESHOLD

    tuned = _probe("cli")
    assert tuned["after"][0] == STREAMING_GEN0_THRESHOLD  # type: ignore[index]
    assert tuned["frozen"] > 1000  # type: ignore[operator]
    default = _probe("cli", AGENTRT_GC="default")
    assert default["after"] == default["before"]
    assert default["frozen"] == 0


def test_the_embedding_guide_snippet_runs_as_written() -> None:
    """The docs' tune_gc example, executed as written (in a fresh interpreter: it is process-wide)."""
    import re
    from pathlib import Path

    from agentrt._os.gc_tuning import STREAMING_GEN0_THRESHOLD

    guide = (Path(__file__).resolve().parents[2] / "docs" / "embedding.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", guide, re.DOTALL) if "tune_gc" in b]
    assert len(blocks) == 1
    probe = blocks[0] + "\nimport gc, json\nprint(json.dumps({'previous': previous, 'now': gc.get_threshold()}))\n"
    base = _allowlisted_env()
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, env=base, timeout=60)
    got = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert got["now"][0] == STREAMING_GEN0_THRESHOLD and got["previous"][0] != STREAMING_GEN0_THRESHOLD


_START_PROBE = r"""
import gc, json
import agentrt
runs = []
gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "stop" else None)
agentrt.tune_gc()
# What a command imports and builds after the call: the run machinery, every dialect, trio.
import agentrt._cli_run, agentrt._conversation, agentrt.cli
from agentrt import Plugins
plugins = Plugins(autoload=True)
for name in ("stream-json", "awp-jsonl", "acp"):
    plugins.dialect(name)
import trio
trio.run(trio.sleep, 0)
print(json.dumps({"collections": runs, "young": gc.get_count()[0]}))
"""


def test_after_tune_gc_a_command_start_makes_no_collection() -> None:
    # The collector's cost in a streaming command is its start: imports leave
    # tens of thousands of live objects. After tune_gc none of them is walked
    # (a young threshold of 20,000 still made two collections here).
    out = subprocess.run(
        [sys.executable, "-c", _START_PROBE], capture_output=True, check=True, env=_allowlisted_env(), timeout=60
    )
    got = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert got["collections"] == []
    assert got["young"] > 20_000  # the start did allocate that many live objects
