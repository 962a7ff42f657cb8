"""decode_batch (the per-chunk hot path) gives exactly the events of decode per object."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import orjson
import pytest

from agentrt._plugins import Plugins
from agentrt.testing import normalize_events

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CAPTURES = sorted((SHARED / "fixtures" / "claude-code").glob("*.stdout.jsonl"))
PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl,stream-json"})


def _corpus_objects() -> list[object]:
    spec = importlib.util.spec_from_file_location("agentrt_test_corpus", SHARED / "bench" / "corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [orjson.loads(line) for _, line in module.corpus_lines(3000, big_lines=False)]


@pytest.mark.parametrize("dialect", ["stream-json", "awp-jsonl"])
@pytest.mark.parametrize("source", [p.name for p in CAPTURES] + ["bench-corpus"])
def test_batch_equals_per_object(dialect: str, source: str) -> None:
    if source == "bench-corpus":
        objs = _corpus_objects()
    else:
        text = (SHARED / "fixtures" / "claude-code" / source).read_text()
        objs = [orjson.loads(line) for line in text.splitlines() if line.strip()]
    one = PLUGINS.dialect(dialect).host_codec()
    per_object = [ev for obj in objs for ev in one.decode(obj)]
    batched = []
    many = PLUGINS.dialect(dialect).host_codec()
    for start in range(0, len(objs), 7):  # chunks of several objects, as the pump sees them
        batched.extend(many.decode_batch(objs[start : start + 7]))
    assert per_object, source
    assert normalize_events(batched) == normalize_events(per_object)
    assert [ev.raw for ev in batched] == [ev.raw for ev in per_object]
