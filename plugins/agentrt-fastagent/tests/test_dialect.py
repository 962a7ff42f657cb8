"""The fastagent dialect and its schema, against the real captures and edge cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt import AgentrtError, Plugins
from agentrt.dialect import InputError, Turn
from agentrt.events import Diagnostic, Lifecycle, TextDelta
from agentrt.lowlevel import JsonlReader
from agentrt_fastagent._dialect import INVALID_LINE, FastAgentDialect
from agentrt_fastagent._schema import is_utc_timestamp, normalize_qr_url, validate_line

from .conftest import CAPTURES

GOOD = {"type": "running", "timestamp": "2026-03-30T10:44:41.128Z", "pid": 1, "message": "m", "data": {}}


def capture_lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (CAPTURES / f"{name}.jsonl").read_text().splitlines() if x.strip()]


def test_registered_through_the_plugin_hook() -> None:
    import agentrt_fastagent

    plugins = Plugins()
    plugins.register(agentrt_fastagent, name="fastagent")
    dialect = plugins.dialect("fastagent")
    assert isinstance(dialect, FastAgentDialect) and dialect.name == "fastagent"


@pytest.mark.parametrize("name", ["fresh-qr", "login-confirmed", "restored-running", "runtime-error"])
def test_real_captures_decode_cleanly_and_round_trip(name: str) -> None:
    raw = (CAPTURES / f"{name}.jsonl").read_bytes()
    reader = JsonlReader()
    # chunked at an awkward size: framing must not matter
    objs = [o for i in range(0, len(raw), 7) for o in reader.feed(raw[i : i + 7])] + reader.finish()
    host = FastAgentDialect().host_codec()
    agent = FastAgentDialect().agent_codec()
    events = [e for o in objs for e in host.decode(o)]
    assert len(events) == len(capture_lines(name))
    assert all(isinstance(e, Lifecycle) for e in events)
    assert events[0].kind == "process_started" and events[0].data == {"channel": "weixin"}
    for event, original in zip(events, capture_lines(name), strict=True):
        (line,) = agent.encode(event)
        assert line == original
        assert event.raw == original


def test_capture_fields() -> None:
    host = FastAgentDialect().host_codec()
    (qr,) = host.decode(capture_lines("fresh-qr")[1])
    assert qr.kind == "qr_code" and qr.pid == 4101 and qr.agent_id == "bot_fixture_qr"
    assert normalize_qr_url(qr.data["qrCodeUrl"]) == qr.data["qrCodeUrl"]
    (err,) = host.decode(capture_lines("runtime-error")[1])
    assert err.kind == "runtime_error" and "IM_GATEWAY_DATA_DIR" in err.data["error"]


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        ({"type": "hello"}, "type"),
        ({"type": None}, "type"),
        ({"timestamp": "2026-03-30T10:44:41.128+01:00"}, "timestamp"),
        ({"timestamp": "2026-03-30T10:44:41.128"}, "timestamp"),
        ({"timestamp": "2026-03-30 10:44:41Z"}, "timestamp"),
        ({"timestamp": "2026-02-30T10:44:41Z"}, "timestamp"),
        ({"timestamp": "2026-03-30T24:00:00Z"}, "timestamp"),
        ({"timestamp": 1774867481}, "timestamp"),
        ({"pid": -1}, "pid"),
        ({"pid": True}, "pid"),
        ({"pid": 1.5}, "pid"),
        ({"pid": "1"}, "pid"),
        ({"pid": 2**53}, "pid"),
        ({"pid": float("nan")}, "pid"),
        ({"message": ""}, "message"),
        ({"message": 3}, "message"),
        ({"data": None}, "data"),
        ({"data": []}, "data"),
        ({"agentId": ""}, "agentId"),
        ({"agentId": 7}, "agentId"),
    ],
)
def test_schema_rejections(patch: dict, reason: str) -> None:
    clean, why = validate_line({**GOOD, **patch})
    assert clean is None and why.startswith(reason)
    (ev,) = FastAgentDialect().host_codec().decode({**GOOD, **patch})
    assert isinstance(ev, Diagnostic) and ev.code == INVALID_LINE


def test_missing_keys_and_non_objects() -> None:
    for key in GOOD:
        assert validate_line({k: v for k, v in GOOD.items() if k != key})[0] is None
    for obj in ([], "x", 1, None):
        assert validate_line(obj)[0] is None


def test_unknown_keys_are_ignored() -> None:
    clean, _ = validate_line({**GOOD, "extra": 1, "agentId": "a"})
    assert clean == {**GOOD, "agentId": "a"}


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-03-30T10:44Z",  # minute-only, as the reference validator accepts
        "2026-03-30T10:44:41Z",
        "2026-03-30T10:44:41.1Z",
        "2026-03-30T10:44:41.123456789Z",
        "2024-02-29T00:00:00Z",
        "2000-02-29T00:00:00Z",
    ],
)
def test_timestamps_accepted(stamp: str) -> None:
    assert is_utc_timestamp(stamp)


@pytest.mark.parametrize(
    "stamp",
    ["2026-03-30T10:44:41z", "2026-03-30T10:44:41.Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
     "2026-03-30T10:44:60Z", "2026-03-30T10Z", "2026-3-30T10:44:41Z", "2026-03-30T10:44:41Z\n",
     "２026-03-30T10:44:41Z"],
)  # fmt: skip
def test_timestamps_rejected(stamp: str) -> None:
    assert not is_utc_timestamp(stamp)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://liteapp.weixin.qq.com/q/7GiQu1?qrcode=abc&bot_type=3", True),
        ("https://LITEAPP.weixin.qq.com/q/x", True),
        ("https://liteapp.weixin.qq.com:443/q/x", True),
        ("http://liteapp.weixin.qq.com/q/x", False),
        ("https://liteapp.weixin.qq.com.evil.example/q/x", False),
        ("https://evil.example/q/x", False),
        ("https://user@liteapp.weixin.qq.com/q/x", False),
        ("https://liteapp.weixin.qq.com:8443/q/x", False),
        ("https://liteapp.weixin.qq.com/qq/x", False),
        ("https://liteapp.weixin.qq.com/q", False),
        ("https://liteapp.weixin.qq.com/q/../admin", False),
        ("https://liteapp.weixin.qq.com/q/%2e%2e/admin", False),
        ("javascript:alert(1)//liteapp.weixin.qq.com/q/", False),
        (" https://liteapp.weixin.qq.com/q/x", False),
        ("https://liteapp.weixin.qq.com/q/x\nSet-Cookie", False),
        ("", False),
        (None, False),
    ],
)
def test_qr_validator(url: object, ok: bool) -> None:
    got = normalize_qr_url(url)
    assert (got is not None) is ok
    if ok:
        assert got.startswith("https://liteapp.weixin.qq.com/q/")


def test_no_stdin_turns() -> None:
    with pytest.raises(AgentrtError) as info:
        FastAgentDialect().host_codec().encode_turn(Turn.text("hi"))
    assert info.value.code == "unsupported_content_block"
    got = FastAgentDialect().agent_codec().decode_input({"type": "user"})
    assert isinstance(got, InputError) and got.code == "unsupported_input"


def test_agent_encode_refuses_invalid_and_skips_other_events() -> None:
    agent = FastAgentDialect().agent_codec()
    assert agent.encode(TextDelta(text="x")) == ()
    with pytest.raises(AgentrtError) as info:
        agent.encode(Lifecycle(kind="running", message="", pid=1, timestamp="2026-03-30T10:44Z"))
    assert info.value.code == "invalid_lifecycle_event"


_kinds = st.sampled_from(sorted(["process_started", "qr_code", "login_confirmed", "running",
                                 "account_invalid", "runtime_error", "stopping", "stopped"]))  # fmt: skip
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


@given(
    kind=_kinds,
    pid=st.integers(0, 2**31),
    message=st.text(min_size=1, max_size=20),
    data=st.dictionaries(st.text(max_size=6), _json, max_size=4),
    agent=st.none() | st.text(min_size=1, max_size=10),
    frac=st.text(alphabet="0123456789", max_size=9),
)
def test_round_trip_property(kind, pid, message, data, agent, frac) -> None:
    stamp = "2026-03-30T10:44:41" + (f".{frac}" if frac else "") + "Z"
    ev = Lifecycle(kind=kind, message=message, pid=pid, timestamp=stamp, data=data, agent_id=agent)
    (line,) = FastAgentDialect().agent_codec().encode(ev)
    wire = json.loads(json.dumps(line))
    (back,) = FastAgentDialect().host_codec().decode(wire)
    assert back == ev


def test_pid_is_an_integer_as_javascript_counts_them() -> None:
    # JSON.parse gives the reference validator a Number: 85350.0 and 8.535e4 are integers there.
    for raw in ("85350.0", "8.535e4", "85350"):
        (ev,) = FastAgentDialect().host_codec().decode(json.loads(json.dumps({**GOOD, "pid": 0})
                                                                  .replace('"pid": 0', f'"pid": {raw}')))  # fmt: skip
        assert isinstance(ev, Lifecycle) and ev.pid == 85350 and type(ev.pid) is int
