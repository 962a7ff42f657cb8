"""In-process checks of the agent's argument, environment and identity rules."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt import AgentrtError
from agentrt.agent import parse_args, turn_identity
from agentrt.agent._settings import (
    js_trim,
    resolve_model,
    resolve_state_dir,
    resolve_system_prompt,
    resolve_timeout,
)


def code_of(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(AgentrtError) as info:
        fn(*args)
    return info.value.code


def test_parse_args_contract() -> None:
    args = parse_args(["--output-format", "stream-json", "--input-format", "stream-json", "--print",
                       "--verbose", "--model", " m ", "--resume", "abc", "--mcp-config", "/x.json"])
    assert (args.model, args.resume, args.dialect) == ("m", "abc", "awp-jsonl")
    assert parse_args(["--dialect", "stream-json"]).dialect == "stream-json"
    # A value-taking flag at the end consumes nothing and is not an error.
    assert parse_args(["--model"]).model == ""
    assert code_of(parse_args, ["--model", "m", "--frobnicate"]) == "unsupported_argument:--frobnicate"
    assert code_of(parse_args, ["--x=1"]) == "unsupported_argument"


def test_model_rules() -> None:
    assert resolve_model(parse_args(["--model", "a"]), {"AGENTRT_MODEL": "b"}) == "a"
    assert resolve_model(parse_args([]), {"AGENTRT_MODEL": "  b  "}) == "b"
    assert resolve_model(parse_args([]), {"AGENTRT_MODEL": "x" * 256}) == "x" * 256
    for bad in ("", "   ", "x" * 257, "a\tb", "a\x7fb"):
        assert code_of(resolve_model, parse_args([]), {"AGENTRT_MODEL": bad}) == "model_required"


@pytest.mark.parametrize(
    ("raw", "seconds"), [("", 120.0), ("1000", 1.0), ("600000", 600.0), (" 2500 ", 2.5), ("000001000", 1.0)]
)
def test_timeout_ok(raw: str, seconds: float) -> None:
    assert resolve_timeout({"AGENTRT_TIMEOUT_MS": raw}) == seconds


@pytest.mark.parametrize("raw", ["999", "600001", "0001000000", "-1000", "1e4", "１２３４", "12.5", "abc"])
def test_timeout_bad(raw: str) -> None:
    assert code_of(resolve_timeout, {"AGENTRT_TIMEOUT_MS": raw}) == "invalid_agentrt_timeout_ms"


def test_system_prompt_rules() -> None:
    assert resolve_system_prompt({}) == ""
    assert resolve_system_prompt({"AGENTRT_SYSTEM_PROMPT": "\ufeff hi \u00a0"}) == "hi"
    limit = 256 * 1024
    assert len(resolve_system_prompt({"AGENTRT_SYSTEM_PROMPT": "x" * limit})) == limit
    # The limit is in UTF-8 bytes, not characters.
    for bad in ("x" * (limit + 1), "é" * (limit // 2 + 1), "a\0b", "bad\udcffbytes"):
        assert code_of(resolve_system_prompt, {"AGENTRT_SYSTEM_PROMPT": bad}) == "invalid_system_prompt"


def test_state_dir_default() -> None:
    assert resolve_state_dir({"HOME": "/home/u"}) == "/home/u/.local/state/agentrt/sessions"
    assert resolve_state_dir({"HOME": "/home/u", "XDG_STATE_HOME": "/st"}) == "/st/agentrt/sessions"
    assert resolve_state_dir({"HOME": "/home/u", "XDG_STATE_HOME": "rel"}) == (
        "/home/u/.local/state/agentrt/sessions")  # a relative XDG value is ignored, as the spec says
    assert resolve_state_dir({"AGENTRT_STATE_DIR": "/a/b/../c"}) == "/a/c"
    assert code_of(resolve_state_dir, {}) == "invalid_state_directory"


def test_state_dir_matches_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    platformdirs = pytest.importorskip("platformdirs")
    monkeypatch.setenv("HOME", "/home/pd")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert resolve_state_dir({"HOME": "/home/pd"}) == platformdirs.user_state_dir("agentrt") + "/sessions"


def test_js_trim_matches_javascript_whitespace() -> None:
    assert js_trim("\u2028\u3000x y\ufeff\n") == "x y"
    assert js_trim("\u200bx") == "\u200bx"  # zero-width space is not whitespace in JS


IDENTITY_VECTOR = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "héllo → 日本語 \"q\" \\ \n\t\u0001 \u2028 😀"},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                                 {"type": "text", "text": "x"}]},
]


def test_turn_identity_is_sha256_of_compact_json() -> None:
    body = json.dumps(IDENTITY_VECTOR, separators=(",", ":"), ensure_ascii=False).encode()
    assert turn_identity(IDENTITY_VECTOR) == hashlib.sha256(body).hexdigest()
    # Extra keys never enter the identity; key order is role, content.
    noisy = [{"content": m["content"], "role": m["role"], "name": "n"} for m in IDENTITY_VECTOR]
    assert turn_identity(noisy) == turn_identity(IDENTITY_VECTOR)


def _node_identity(messages: object) -> str:
    script = (
        "const c=require('crypto');let d='';process.stdin.on('data',x=>d+=x);"
        "process.stdin.on('end',()=>{const m=JSON.parse(d);"
        "process.stdout.write(c.createHash('sha256').update(JSON.stringify(m),'utf8').digest('hex'))})"
    )
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run([node, "-e", script], input=json.dumps(messages).encode(), capture_output=True,
                          check=True, timeout=20)
    return done.stdout.decode()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (JSON.stringify cross-check)")
def test_turn_identity_matches_javascript() -> None:
    assert turn_identity(IDENTITY_VECTOR) == _node_identity(IDENTITY_VECTOR)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (JSON.stringify cross-check)")
@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), _text), min_size=1, max_size=5))
def test_turn_identity_matches_javascript_property(pairs: list[tuple[str, str]]) -> None:
    messages = [{"role": r, "content": c} for r, c in pairs]
    assert turn_identity(messages) == _node_identity(messages)


class _Chunks:
    """A byte source that returns the given chunks, then EOF."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def receive_some(self) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


def _expected_lines(data: bytes, limit: int) -> list[object]:
    from agentrt.agent._io import Oversized

    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [Oversized(len(p)) if len(p) > limit else p for p in parts]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.booleans(),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=30),
)
def test_read_lines_any_chunking(lines: list[bytes], trailing_newline: bool, cuts: list[int]) -> None:
    import trio

    from agentrt.agent._io import read_lines

    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    chunks, pos, i = [], 0, 0
    while pos < len(data):
        size = cuts[i % len(cuts)]
        chunks.append(data[pos : pos + size])
        pos, i = pos + size, i + 1

    async def collect() -> list[object]:
        return [line async for line in read_lines(_Chunks(chunks), limit=6)]  # type: ignore[arg-type]

    assert trio.run(collect) == _expected_lines(data, 6)
