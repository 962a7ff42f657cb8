"""The ACP codecs, pure: real captures replayed through the host codec, the handshake, every mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agentrt.dialect import DocumentBlock, ImageBlock, TextBlock, Turn
from agentrt.errors import AgentrtError
from agentrt.events import (
    ControlRequest,
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.testing import check_dialect, normalize_events
from agentrt_acp.codec import AcpAgentCodec, AcpDialect, AcpHostCodec

CAPTURES = Path(__file__).resolve().parent / "captures" / "acp"


def _lines(path: Path) -> list[Any]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _split(data: bytes | None) -> list[Any]:
    assert data is None or data.endswith(b"\n")
    return [orjson.loads(line) for line in (data or b"").splitlines()]


def _host(**start: Any) -> AcpHostCodec:
    codec = AcpHostCodec()
    codec.start(resume=start.get("resume"), model=start.get("model"), cwd="/tmp/acp-capture")
    return codec


def _replay(name: str, allow: bool, resume: str | None = None) -> tuple[list[Event], list[Any]]:
    """Decode a capture's stdout as the host would, answering as the recorder did; return events and lines sent."""
    codec = _host(resume=resume)
    sent = _split(codec.encode_turn(Turn.text("Say hello")))
    events: list[Event] = []
    for obj in _lines(CAPTURES / f"{name}.stdout.jsonl"):
        got = list(codec.decode(obj))
        events.extend(got)
        sent.extend(_split(codec.drain_output()))
        for ev in got:
            if isinstance(ev, ControlRequest):
                response = {"behavior": "allow"} if allow else {"behavior": "deny", "message": "no"}
                sent.extend(_split(codec.encode_control_response(ev, response, None)))
    return events, sent


def _shape(msg: dict[str, Any]) -> tuple[Any, ...]:
    return (msg.get("id"), msg.get("method"), msg.get("result"))


@pytest.mark.parametrize(("name", "allow"), [("ts_example_reject", False), ("ts_example_allow", True)])
def test_typescript_example_capture(name: str, allow: bool) -> None:
    events, sent = _replay(name, allow)
    # What the host writes is what the recorder wrote: same requests, ids and permission answer.
    assert [_shape(m) for m in sent] == [_shape(m) for m in _lines(CAPTURES / f"{name}.stdin.jsonl")]
    kinds = [type(ev).__name__ for ev in events]
    assert kinds[:3] == ["RawEvent", "SessionStarted", "TextDelta"]
    assert kinds[-1] == "TurnCompleted" and kinds.count("TurnCompleted") == 1
    assert [ev.id for ev in events if isinstance(ev, ToolUse)] == ["call_1", "call_2"]
    results = [ev.tool_use_id for ev in events if isinstance(ev, ToolResult)]
    assert results == (["call_1", "call_2"] if allow else ["call_1"])
    (control,) = [ev for ev in events if isinstance(ev, ControlRequest)]
    assert control.subtype == "can_use_tool" and control.request["input"]["path"] == "/home/user/project/config.json"
    # Text runs split by tool calls are separate blocks.
    indices = [ev.index for ev in events if isinstance(ev, TextDelta)]
    assert indices == sorted(set(indices)) and len(indices) == 3
    assert not [ev for ev in events if isinstance(ev, Diagnostic)]


def test_cancel_capture_ends_with_turn_cancelled() -> None:
    events, sent = _replay("ts_example_cancel", False)
    assert isinstance(events[-1], TurnFailed) and events[-1].code == "turn_cancelled"
    assert [m.get("method") for m in sent] == ["initialize", "session/new", "session/prompt"]


def test_python_example_captures() -> None:
    events, _ = _replay("py_example_two_turns", False)
    assert [ev.text for ev in events if isinstance(ev, TextDelta)][:2] == ["Client sent:", "Say hello"]
    # The second turn's response is not ours in this replay (one prompt sent): a diagnostic, not a terminal.
    assert [type(ev) for ev in events if isinstance(ev, (TurnCompleted, TurnFailed))] == [TurnCompleted]
    assert [ev.code for ev in events if isinstance(ev, Diagnostic)] == ["unexpected_response"]


def test_claude_agent_acp_captures() -> None:
    events, sent = _replay("claude_acp_two_turns", False)
    assert [m.get("method") for m in sent] == ["initialize", "session/new", "session/prompt"]
    first = [ev for ev in events if isinstance(ev, (TextDelta, TurnCompleted))][:3]
    assert [ev.text for ev in first[:2]] == ["Hello from t", "he fake API."]  # the empty first chunk is no text
    assert isinstance(first[2], TurnCompleted) and first[2].usage == Usage(
        input_tokens=10, output_tokens=5, cache_read_input_tokens=0, cache_creation_input_tokens=0
    )
    sid = next(ev.session_id for ev in events if isinstance(ev, SessionStarted))
    events, sent = _replay("claude_acp_load", False, resume=sid)
    assert [m.get("method") for m in sent] == ["initialize", "session/load", "session/prompt"]
    replayed = [ev.name for ev in events if isinstance(ev, RawEvent) and ev.name.startswith("replay/")]
    assert replayed.count("replay/agent_message_chunk") == 2 and "replay/user_message_chunk" in replayed
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "Hello from the fake API."
    assert [ev.session_id for ev in events if isinstance(ev, SessionStarted)] == [sid]
    assert not [ev for ev in events if isinstance(ev, Diagnostic)]


#: The turns the fixture agent half carries (it accepts text and images, not embedded resources).
TURNS = [
    Turn.text("hello"),
    Turn.text(""),
    Turn.text('quotes " and \\ and \n newlines, ünïcödé, emoji 🙂, \u2028 separators'),
    Turn(content=(ImageBlock(media_type="image/png", data="iVBORw0KGgo="), TextBlock(text="describe it"))),
]


def test_check_dialect_full_suite_with_the_captures() -> None:
    samples = [obj for path in sorted(CAPTURES.glob("*.stdout.jsonl")) for obj in _lines(path)]
    # The suite feeds each half's drain_output to the other: the handshake round trip takes every clause.
    check_dialect(AcpDialect, samples=samples, turns=TURNS, scripts=SCRIPTS, fuzz=600)


def test_check_dialect_catches_a_handshake_that_stalls() -> None:
    class Forgetful(AcpHostCodec):
        def drain_output(self) -> bytes | None:
            super().drain_output()
            return None  # the next handshake request is never written

    class ForgetfulDialect(AcpDialect):
        def host_codec(self) -> AcpHostCodec:
            return Forgetful(self.options)

    with pytest.raises(AssertionError, match="encode_turn then decode_input gave"):
        check_dialect(ForgetfulDialect, turns=TURNS, scripts=SCRIPTS, fuzz=10)


# -- host and agent halves talking to each other --------------------------------------------------


def _exchange(host: AcpHostCodec, agent: AcpAgentCodec, turn: Turn) -> tuple[Any, list[Event]]:
    """Run the handshake between the two halves until the agent has the turn."""
    pending = _split(host.encode_turn(turn))
    events: list[Event] = []
    for _ in range(10):
        got = None
        for msg in pending:
            decoded = agent.decode_input(msg)
            if isinstance(decoded, Turn):
                got = decoded
        for out in agent.drain_output():
            events.extend(host.decode(orjson.loads(orjson.dumps(out))))
        if got is not None:
            return got, events
        pending = _split(host.drain_output())
    raise AssertionError("the handshake did not reach the prompt")


SCRIPTS: list[list[Event]] = [
    [
        TextDelta(text="Hello, "),
        TextDelta(text="world ✓"),
        ThinkingDelta(text="hmm"),
        TurnCompleted(usage=Usage(input_tokens=12, output_tokens=8)),
    ],
    [TextDelta(text="x"), TurnFailed(code="max_tokens", message="the agent stopped the turn (max_tokens)")],
    [TurnFailed(code="turn_cancelled", message="the agent stopped the turn (cancelled)")],
]


@pytest.mark.parametrize("script", SCRIPTS)
def test_agent_half_round_trip(script: list[Event]) -> None:
    host, agent = AcpHostCodec(), AcpAgentCodec()
    host.start(resume=None, model=None, cwd="/")
    turn = Turn(content=(TextBlock(text="hi"), ImageBlock(media_type="image/png", data="iVBORw0KGgo=")))
    got, handshake = _exchange(host, agent, turn)
    assert got == turn
    assert [type(ev) for ev in handshake] == [RawEvent, SessionStarted]
    decoded: list[Event] = []
    for event in script:
        for obj in agent.encode(event):
            decoded.extend(host.decode(orjson.loads(orjson.dumps(obj))))
    want = [
        ev if not isinstance(ev, TurnCompleted) else TurnCompleted(session_id=host.session_id, usage=ev.usage)
        for ev in script
    ]
    assert normalize_events(decoded) == normalize_events(want)


def test_agent_half_tool_calls_and_failures() -> None:
    host, agent = AcpHostCodec(), AcpAgentCodec()
    host.start(resume=None, model=None, cwd="/")
    _exchange(host, agent, Turn.text("go"))
    events: list[Event] = []
    for ev in (
        ToolUse(id="t1", name="Read", input={"p": 1}, summary="Reading p"),
        ToolResult(tool_use_id="t1", content="ok"),
        TurnFailed(code="provider_timeout", message="slow"),
    ):
        for obj in agent.encode(ev):
            events.extend(host.decode(obj))
    assert [(e.id, e.input, e.summary) for e in events if isinstance(e, ToolUse)] == [("t1", {"p": 1}, "Reading p")]
    assert [(e.tool_use_id, e.content) for e in events if isinstance(e, ToolResult)] == [("t1", "ok")]
    assert isinstance(events[-1], TurnFailed) and events[-1].code == "rpc_internal_error"
    assert "provider_timeout" in events[-1].message


# -- the host codec's rules ------------------------------------------------------------------------


def _ready(caps: dict[str, Any] | None = None, **start: Any) -> AcpHostCodec:
    codec = _host(**start)
    codec.encode_turn(Turn.text("first"))
    codec.decode({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": caps or {}}})
    codec.drain_output()
    codec.decode({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}})
    return codec


def test_handshake_failures_fail_the_turn_with_a_code() -> None:
    codec = _host()
    codec.encode_turn(Turn.text("x"))
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": "boom"}})
    assert isinstance(ev, TurnFailed) and ev.code == "acp_initialize_failed" and ev.message == "boom"
    assert codec.drain_output() is None
    # The next turn starts the handshake again.
    assert _split(codec.encode_turn(Turn.text("y")))[0]["method"] == "initialize"
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 2}})
    assert isinstance(ev, TurnFailed) and ev.code == "unsupported_protocol_version"
    codec.encode_turn(Turn.text("z"))
    codec.decode({"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    assert _split(codec.drain_output())[0]["method"] == "session/new"
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "log in"}})
    assert isinstance(ev, TurnFailed) and ev.code == "acp_auth_required"


def test_model_goes_through_the_session_when_the_agent_lists_models() -> None:
    codec = _host(model="m-2")
    codec.encode_turn(Turn.text("x"))
    codec.decode({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    codec.drain_output()
    events = codec.decode({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s", "models": {"availableModels": []}}})
    assert [type(e) for e in events] == [SessionStarted]
    (set_model,) = _split(codec.drain_output())
    assert set_model["method"] == "session/set_model" and set_model["params"] == {"sessionId": "s", "modelId": "m-2"}
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "no"}})
    assert isinstance(ev, Diagnostic) and ev.code == "model_not_set"
    (prompt,) = _split(codec.drain_output())
    assert prompt["method"] == "session/prompt" and prompt["params"]["prompt"] == [{"type": "text", "text": "x"}]


def test_content_blocks_follow_the_prompt_capabilities() -> None:
    image = Turn(content=(ImageBlock(media_type="image/png", data="AA=="),))
    document = Turn(content=(DocumentBlock(media_type="application/pdf", data="AA=="),))
    # Before the capabilities are known the turn waits; refused when they arrive, nothing written.
    codec = _host()
    codec.encode_turn(image)
    codec.decode({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    codec.drain_output()
    events = codec.decode({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}})
    assert isinstance(events[-1], TurnFailed) and events[-1].code == "unsupported_content_block"
    assert codec.drain_output() is None
    # Once known, refused before anything is written.
    with pytest.raises(AgentrtError) as info:
        codec.encode_turn(image)
    assert info.value.code == "unsupported_content_block"
    codec = _ready({"promptCapabilities": {"image": True, "embeddedContext": True}})
    assert _split(codec.encode_turn(image))[0]["params"]["prompt"][0]["type"] == "image"
    block = _split(codec.encode_turn(document))[0]["params"]["prompt"][0]
    assert block["type"] == "resource" and block["resource"]["blob"] == "AA=="
    with pytest.raises(AgentrtError) as info:
        codec.encode_turn(Turn.text("\ud800"))
    assert info.value.code == "unsupported_content_block"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"stopReason": "end_turn"}, ("TurnCompleted", None)),
        ({"stopReason": "max_tokens"}, ("TurnFailed", "max_tokens")),
        ({"stopReason": "max_turn_requests"}, ("TurnFailed", "max_turn_requests")),
        ({"stopReason": "refusal"}, ("TurnFailed", "refusal")),
        ({"stopReason": "cancelled"}, ("TurnFailed", "turn_cancelled")),
        ({"stopReason": "sideways"}, ("TurnFailed", "unknown_stop_reason")),
        ({"stopReason": {}}, ("TurnFailed", "unknown_stop_reason")),
    ],
)
def test_stop_reasons(result: dict[str, Any], expected: tuple[str, str | None]) -> None:
    codec = _ready()
    codec.drain_output()
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 2, "result": result})
    assert (type(ev).__name__, getattr(ev, "code", None)) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [(-32601, "rpc_method_not_found"), (-32602, "rpc_invalid_params"), (-32000, "acp_auth_required"), (7, "rpc_error")],
)
def test_prompt_errors(code: int, expected: str) -> None:
    codec = _ready()
    codec.drain_output()
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 2, "error": {"code": code, "message": "m"}})
    assert isinstance(ev, TurnFailed) and ev.code == expected


def test_permission_options_chosen_by_kind() -> None:
    def ask(options: list[dict[str, Any]], allow: bool, rid: Any = 5) -> Any:
        codec = _ready()
        params = {"sessionId": "s1", "toolCall": {"toolCallId": "t", "title": "T"}, "options": options}
        (req,) = codec.decode({"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": params})
        assert isinstance(req, ControlRequest) and req.subtype == "can_use_tool"
        response = {"behavior": "allow"} if allow else {"behavior": "deny"}
        (answer,) = _split(codec.encode_control_response(req, response, None))
        assert answer["id"] == rid
        return answer["result"]["outcome"]

    opts = [
        {"optionId": "a2", "kind": "allow_always", "name": "A"},
        {"optionId": "r2", "kind": "reject_always", "name": "R"},
    ]
    assert ask(opts, True) == {"outcome": "selected", "optionId": "a2"}
    assert ask(opts, False) == {"outcome": "selected", "optionId": "r2"}
    assert ask([*opts, {"optionId": "r1", "kind": "reject_once", "name": "r"}], False, "x")["optionId"] == "r1"
    assert ask([{"optionId": "a1", "kind": "allow_once", "name": "a"}], False) == {"outcome": "cancelled"}


def test_interrupt_cancels_and_answers_open_permission_requests() -> None:
    codec = _host()
    codec.encode_turn(Turn.text("x"))
    assert codec.encode_interrupt() is None  # no prompt sent yet: the host stops the process instead
    codec = _ready()
    codec.drain_output()
    params = {"sessionId": "s1", "toolCall": {"toolCallId": "t"}, "options": []}
    (req,) = codec.decode({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": params})
    cancel, answer = _split(codec.encode_interrupt())
    assert cancel == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    assert answer == {"jsonrpc": "2.0", "id": 9, "result": {"outcome": {"outcome": "cancelled"}}}
    assert codec.encode_control_response(req, {"behavior": "allow"}, None) is None  # answered once only


def test_other_agent_requests_and_stray_messages() -> None:
    codec = _ready()
    codec.drain_output()
    (req,) = codec.decode({"jsonrpc": "2.0", "id": 3, "method": "terminal/create", "params": {"command": "rm"}})
    assert isinstance(req, ControlRequest) and req.subtype == "terminal/create"
    (answer,) = _split(codec.encode_control_response(req, None, "unsupported"))
    assert answer["error"]["code"] == -32601 and answer["id"] == 3
    (ev,) = codec.decode({"jsonrpc": "2.0", "method": "_vendor/hint", "params": {}})
    assert isinstance(ev, RawEvent) and ev.name == "_vendor/hint"
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": 77, "result": {}})
    assert isinstance(ev, Diagnostic) and ev.code == "unexpected_response"
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    (ev,) = codec.decode(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s9", "update": update}}
    )
    assert isinstance(ev, Diagnostic) and ev.code == "unknown_session"
    (ev,) = codec.decode(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s1",
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}},
            },
        }
    )
    assert isinstance(ev, RawEvent)  # an empty first chunk (claude-agent-acp sends one) is no text
    (ev,) = codec.decode({"jsonrpc": "2.0", "id": [1], "method": "x"})
    assert isinstance(ev, Diagnostic) and ev.code == "unexpected_output_shape"


# -- the typed line loader ---------------------------------------------------------------------


def _chunk_line(text: Any, sid: Any = "s1", **extra: Any) -> bytes:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return orjson.dumps(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}, **extra}
    )


TYPED_CASES = [
    _chunk_line("hello"),
    _chunk_line(""),
    _chunk_line("x", sid="other"),
    _chunk_line("x", id=4),
    _chunk_line(5),
    _chunk_line("dup")[:-1] + b',"method":"other/method"}',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA=="}}}}',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":{"text":"py","type":"text"},"sessionUpdate":"agent_message_chunk"},"sessionId":"s1"}}',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"t"}}}}',
]


@pytest.mark.parametrize("loaded", [False, True], ids=["plain", "replaying"])
def test_typed_chunk_lines_give_the_plain_events(loaded: bool) -> None:
    from agentrt._line_parse import decode_objects
    from agentrt.lowlevel import JsonlReader, Malformed

    blob = (
        b"\n".join([*TYPED_CASES, *(CAPTURES / "ts_example_allow.stdout.jsonl").read_bytes().splitlines()[2:]]) + b"\n"
    )

    def read(typed: bool) -> list[tuple[str, Any]]:
        codec = _ready()
        codec._updates.replaying = loaded
        reader = JsonlReader()
        if typed:  # the chunk-at-a-time path, as the pump takes it

            def general(line: bytes) -> list[Event]:
                return decode_objects(codec, [obj for obj in reader.parse(line) if type(obj) is not Malformed])

            events = codec.decode_lines(reader.feed_lines(blob), general)
        else:
            events = [ev for obj in reader.feed(blob) for ev in codec.decode(obj)]
        return [(repr(ev), ev.raw) for ev in events]

    typed, plain = read(True), read(False)
    assert typed == plain
    assert any("hello" in r for r, _ in plain) is not loaded  # replayed history is no reply text

    # The hot line did take the typed path: no general parse, the line itself kept as raw.
    def never(line: bytes) -> list[Event]:
        raise AssertionError(f"the general path took {line!r}")

    (event,) = _ready().decode_lines([_chunk_line("hello")], never)
    assert type(event) is TextDelta and type(event._raw) is bytes
