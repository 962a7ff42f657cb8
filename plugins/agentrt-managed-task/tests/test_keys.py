"""The §B idempotency key and the JSON.stringify parity it depends on."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess

import pytest

from agentrt_managed_task._jsjson import idempotency_key, js_length, js_slice, task_digest_input

SESSION = "3f0c9a1e-2b4d-4e6f-8a1b-2c3d4e5f6a7b"
TURN = "a" * 64


def test_key_vector_non_ascii_and_fractional_timeout() -> None:
    # Computed by hand from the §B formula: sha256(utf8(s\0t\0c\0) || utf8(JSON.stringify(...))).
    expected = hashlib.sha256(
        f"{SESSION}\0{TURN}\0call_1\0".encode() + '{"argv":["echo","héllo wörld ✓"],"timeout_seconds":1.5}'.encode()
    ).hexdigest()
    assert expected == "ee82df6ca7758499772aba6a2e28216336fbdbd9614510d23e75e6f2a019179b"
    key = idempotency_key(SESSION, TURN, "call_1", ["echo", "héllo wörld ✓"], 1.5)
    assert key == "awp-reference-agent:" + expected


def test_integral_float_timeout_serialises_like_js() -> None:
    literal = "awp-reference-agent:6aa40c4a873693b8e1dd4b4addf36fe829704abf802935e759a41b3d9ecb4ed5"
    assert idempotency_key(SESSION, TURN, "call_1", ["echo", "hi"], 60) == literal
    assert idempotency_key(SESSION, TURN, "call_1", ["echo", "hi"], 60.0) == literal
    assert task_digest_input(["echo", "hi"], 60.0) == '{"argv":["echo","hi"],"timeout_seconds":60}'


def test_every_identity_part_changes_the_key() -> None:
    base = idempotency_key(SESSION, TURN, "c", ["echo"], 60)
    assert idempotency_key(SESSION + "x", TURN, "c", ["echo"], 60) != base
    assert idempotency_key(SESSION, "b" * 64, "c", ["echo"], 60) != base
    assert idempotency_key(SESSION, TURN, "d", ["echo"], 60) != base
    assert idempotency_key(SESSION, TURN, "c", ["echo", "x"], 60) != base
    assert idempotency_key(SESSION, TURN, "c", ["echo"], 61) != base


def test_js_length_and_slice_count_utf16_units() -> None:
    assert js_length("a😀") == 3
    assert js_slice("ab😀c", 3) == "ab"  # never half a surrogate pair
    assert js_slice("ab😀c", 4) == "ab😀"
    assert js_slice("x" * 10, 4) == "xxxx"


_ALPHABET = ["a", "Z", "0", " ", '"', "\\", "/", "\n", "\t", "\x01", "\x1f", "\x7f", "é", "€", "\u2028", "😀", "\ud800"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_stringify_parity_with_node() -> None:
    rng = random.Random(7)
    cases = []
    for _ in range(200):
        argv = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 4))]
        timeout = rng.choice([1, 60, 300, 1.5, 2.25, 299.999, 60.0, 0.1 + 0.2 + 1])
        cases.append({"argv": argv, "timeout_seconds": timeout})
    # Hand node the cases as JSON with surrogates escaped, so lone ones arrive intact.
    script = (
        "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
        "for(const c of JSON.parse(s))console.log(JSON.stringify({argv:c.argv,timeout_seconds:c.timeout_seconds}))})"
    )
    out = subprocess.run(
        ["node", "-e", script], input=json.dumps(cases), capture_output=True, text=True, timeout=30, check=True
    ).stdout.split("\n")[:-1]  # not splitlines: U+2028 is a line break to Python
    assert len(out) == len(cases)
    for case, expected in zip(cases, out):
        assert task_digest_input(case["argv"], case["timeout_seconds"]) == expected
