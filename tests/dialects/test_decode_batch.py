"""decode_batch (the per-chunk hot path) gives exactly the events of decode per object."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt._plugins import Plugins
from agentrt.dialect import make_text_delta
from agentrt.events import TextDelta
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


# Objects shaped like the text-delta lines each fast path inlines, with every
# part that the inlined path checks varied: missing, of the wrong JSON type,
# empty, or an index that is a bool.
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3), st.just([]), st.just({}))


def _usually(value: object, other: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    # The shape the fast path wants about three times in four, else something else.
    return st.one_of(st.just(value), st.just(value), st.just(value), other)


_texts = st.one_of(st.text(min_size=1, max_size=5), st.just(""), _json_leaf)
_indices = st.one_of(st.integers(0, 3), st.booleans(), _json_leaf)


def _maybe(draw: st.DrawFn, obj: dict[str, object], key: str, value: object) -> None:
    if draw(st.integers(0, 9)):  # mostly present
        obj[key] = value


@st.composite
def _delta_like(draw: st.DrawFn, wrapped: bool) -> object:
    if not draw(st.integers(0, 12)):
        return draw(_json_leaf)  # not an object at all
    delta: dict[str, object] = {}
    _maybe(draw, delta, "type", draw(_usually("text_delta", st.sampled_from(["thinking_delta", "input_json_delta"]))))
    _maybe(draw, delta, "text", draw(_texts))
    _maybe(draw, delta, "thinking", draw(_texts))
    inner: dict[str, object] = {}
    _maybe(draw, inner, "type", draw(_usually("content_block_delta", st.sampled_from(["message_start", "other"]))))
    _maybe(draw, inner, "index", draw(_indices))
    _maybe(draw, inner, "delta", draw(_usually(delta, _json_leaf)))
    if not wrapped:
        return inner
    outer: dict[str, object] = {}
    _maybe(draw, outer, "type", draw(_usually("stream_event", st.sampled_from(["content_block_delta", "assistant"]))))
    _maybe(draw, outer, "event", draw(_usually(inner, _json_leaf)))
    if draw(st.booleans()):
        outer["api_message_id"] = draw(st.sampled_from(["msg_a", "msg_b", None, 3]))
    return outer


@pytest.mark.parametrize("dialect", ["stream-json", "awp-jsonl"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_batch_equals_per_object_on_odd_shapes(dialect: str, data: st.DataObject) -> None:
    objs = data.draw(st.lists(st.one_of(_delta_like(True), _delta_like(False)), min_size=1, max_size=12))
    one = PLUGINS.dialect(dialect).host_codec()
    per_object = [ev for obj in objs for ev in one.decode(obj)]
    many = PLUGINS.dialect(dialect).host_codec()
    cut = data.draw(st.integers(0, len(objs)))
    batched = many.decode_batch(objs[:cut]) + many.decode_batch(objs[cut:])
    # repr, not ==: it tells an index of True from 1 (normalize_events would coerce it).
    assert [repr(ev) for ev in batched] == [repr(ev) for ev in per_object]
    assert [ev.raw for ev in batched] == [ev.raw for ev in per_object]


@given(text=st.text(), index=st.integers(0, 1 << 40))
def test_make_text_delta_is_the_constructor_made_cheap(text: str, index: int) -> None:
    raw = {"any": "object"}
    fast = make_text_delta(text, index, raw)
    slow = TextDelta(text=text, index=index, raw=raw)
    assert type(fast) is TextDelta
    assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
    assert fast.raw is raw
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.text = "changed"  # type: ignore[misc]
