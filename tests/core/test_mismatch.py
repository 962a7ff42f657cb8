"""The protocol probe, line by line: which output is another dialect's, and what disarms it."""

from __future__ import annotations

import pytest

from agentrt._protocol_mismatch import ProtocolProbe, first_output_timeout, looks_like
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic, RawEvent, SessionStarted, TextDelta

CLAUDE_INIT = {"type": "system", "subtype": "init", "session_id": "s", "model": "m", "claude_code_version": "2.1",
               "apiKeySource": "none", "permissionMode": "default"}
AWP_INIT = {"type": "system", "subtype": "init", "session_id": "s", "model": "m"}
RPC = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}


@pytest.mark.parametrize(("obj", "configured", "expected"), [
    (CLAUDE_INIT, "awp-jsonl", "stream-json"),
    (CLAUDE_INIT, "stream-json", None),
    (CLAUDE_INIT, "acp", "stream-json"),
    (AWP_INIT, "awp-jsonl", None),
    (AWP_INIT, "stream-json", None),
    (AWP_INIT, "acp", "awp-jsonl"),
    ({"type": "stream_event", "event": {}}, "awp-jsonl", "stream-json"),
    ({"type": "control_request", "request_id": "r", "request": {}}, "awp-jsonl", "stream-json"),
    ({"type": "content_block_delta", "index": 0}, "acp", "awp-jsonl"),
    (RPC, "awp-jsonl", "acp"),
    (RPC, "stream-json", "acp"),
    (RPC, "acp", None),
    (RPC, "my-dialect", "acp"),
    ({"type": "mine"}, "my-dialect", None),
    ("not an object", "awp-jsonl", None),
])
def test_looks_like(obj: object, configured: str, expected: str | None) -> None:
    found = looks_like(obj, configured)
    assert (found[0] if found else None) == expected


def test_the_first_recognised_line_disarms_the_probe_for_good() -> None:
    probe = ProtocolProbe("acp", "/bin/agent", 20.0)
    assert probe.look([RawEvent(name="initialize", raw=RPC)]) is None  # a handshake response is ACP's own
    assert not probe.armed


def test_a_foreign_line_after_lines_of_no_dialect_is_found_where_it_is() -> None:
    probe = ProtocolProbe("awp-jsonl", "/bin/agent", 20.0)
    shapeless = Diagnostic(code="unexpected_output_shape", detail="?", raw={"odd": 1})
    assert probe.look([shapeless]) is None and probe.armed  # not recognised, not another dialect's either
    found = probe.look([shapeless, SessionStarted(session_id="s", raw=CLAUDE_INIT), TextDelta(text="hi")])
    assert found is not None and found[0] == 1 and found[1].code == "protocol_mismatch"
    assert not probe.armed


def test_silence_names_the_dialect_the_executable_suggests() -> None:
    message = ProtocolProbe("awp-jsonl", "/opt/bin/claude", 20.0).silent().message
    assert "within 20 s of the prompt; by its name it may speak stream-json" in message
    message = ProtocolProbe("awp-jsonl", "/opt/bin/my-agent", 5.0).silent().message
    assert "check the agent's protocol" in message


@pytest.mark.parametrize(("value", "expected"), [("", 30.0), ("0", None), ("2.5", 2.5)])
def test_first_output_timeout_from_the_environment(value: str, expected: float | None) -> None:
    assert first_output_timeout({"AGENTRT_FIRST_OUTPUT_TIMEOUT": value}) == expected


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_first_output_timeout_is_refused(value: str) -> None:
    with pytest.raises(AgentrtError) as info:
        first_output_timeout({"AGENTRT_FIRST_OUTPUT_TIMEOUT": value})
    assert info.value.code == "invalid_first_output_timeout"
