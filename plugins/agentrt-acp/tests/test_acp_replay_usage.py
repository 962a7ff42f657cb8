"""The ACP host codec: a loaded session's replay that follows the load response, and usage where peers put it.

Gemini CLI answers ``session/load`` first and streams the history after
(``streamHistory`` is not awaited): those updates are replay until the prompt
goes out, never the new turn's text.  Gemini reports usage in the prompt
response's ``_meta.quota``; Codex sends ``usage_update`` (the context window).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from agentrt.dialect import Turn
from agentrt.events import Event, RawEvent, Status, TextDelta, ToolResult, ToolUse, TurnCompleted, TurnFailed, Usage
from agentrt_acp.codec import AcpHostCodec

SID = "s-1"


def _sent(data: bytes | None) -> list[Any]:
    return [orjson.loads(line) for line in (data or b"").splitlines()]


def _update(update_kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": SID, "update": {"sessionUpdate": update_kind, **fields}},
    }


def _chunk(text: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    return _update(kind, content={"type": "text", "text": text})


def _feed(codec: AcpHostCodec, objs: list[dict[str, Any]], *, lines: bool) -> list[Event]:
    """Decode ``objs`` as one read (the pump's chunk path, or message by message)."""
    if lines:
        raw = [orjson.dumps(o) for o in objs]
        return codec.decode_lines(raw, lambda line: codec.decode(orjson.loads(line)))
    return [ev for o in objs for ev in codec.decode(o)]


def _loaded(model: str | None) -> tuple[AcpHostCodec, list[str]]:
    """A codec resuming SID, through initialize; returns it and the methods sent so far."""
    codec = AcpHostCodec()
    codec.start(resume=SID, model=model, cwd="/tmp")
    methods = [m["method"] for m in _sent(codec.encode_turn(Turn.text("what did I say?")))]
    init = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}}
    codec.decode(init)
    methods += [m["method"] for m in _sent(codec.drain_output())]
    return codec, methods


@pytest.mark.parametrize("lines", [False, True], ids=["decode", "decode_lines"])
@pytest.mark.parametrize("model", [None, "gemini-2.5-flash"])
def test_replay_after_the_load_response_is_not_the_new_turns_text(lines: bool, model: str | None) -> None:
    codec, methods = _loaded(model)
    assert methods == ["initialize", "session/load"]
    load_result: dict[str, Any] = {"models": {"availableModels": [], "currentModelId": "x"}} if model else {}
    # The load response, then the history in the same read (Gemini's order).
    events = _feed(
        codec,
        [
            {"jsonrpc": "2.0", "id": 1, "result": load_result},
            _chunk("remember this", "user_message_chunk"),
            _chunk("First answer."),
            _chunk("a thought", "agent_thought_chunk"),
        ],
        lines=lines,
    )
    sent = [m["method"] for m in _sent(codec.drain_output())]
    if model:  # set_model first: its answer is the barrier, and history may still come before it
        assert sent == ["session/set_model"]
        events += _feed(codec, [_chunk("More history."), {"jsonrpc": "2.0", "id": 2, "result": {}}], lines=lines)
        sent = [m["method"] for m in _sent(codec.drain_output())]
    assert sent == ["session/prompt"]
    assert not [ev for ev in events if isinstance(ev, TextDelta)], events
    replayed = [ev.name for ev in events if isinstance(ev, RawEvent) and ev.name.startswith("replay/")]
    assert "replay/agent_message_chunk" in replayed and "replay/user_message_chunk" in replayed
    # Once the prompt is out, chunks are the new turn's reply.
    prompt_id = 3 if model else 2
    events = _feed(
        codec,
        [
            _chunk("Second "),
            _chunk("answer."),
            {"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}},
        ],
        lines=lines,
    )
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "Second answer."
    assert isinstance(events[-1], TurnCompleted)


def _ready() -> AcpHostCodec:
    codec = AcpHostCodec()
    codec.start(resume=None, model=None, cwd="/tmp")
    codec.encode_turn(Turn.text("hi"))
    codec.decode({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    codec.drain_output()
    codec.decode({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}})
    assert [m["method"] for m in _sent(codec.drain_output())] == ["session/prompt"]
    return codec


def test_usage_from_gemini_meta_quota() -> None:
    codec = _ready()
    meta = {"quota": {"token_count": {"input_tokens": 20, "output_tokens": 10}, "model_usage": []}}
    (done,) = codec.decode({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn", "_meta": meta}})
    assert isinstance(done, TurnCompleted) and done.usage == Usage(input_tokens=20, output_tokens=10)


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {},
        {"quota": "x"},
        {"quota": {"token_count": {"input_tokens": "10"}}},
        {"quota": {"token_count": {"input_tokens": True}}},
    ],
)
def test_meta_without_counts_is_no_usage(meta: Any) -> None:
    codec = _ready()
    (done,) = codec.decode({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn", "_meta": meta}})
    assert isinstance(done, TurnCompleted) and done.usage is None


def test_the_response_usage_wins_over_meta() -> None:
    codec = _ready()
    result = {"stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 2},
              "_meta": {"quota": {"token_count": {"input_tokens": 20, "output_tokens": 10}}}}  # fmt: skip
    (done,) = codec.decode({"jsonrpc": "2.0", "id": 2, "result": result})
    assert isinstance(done, TurnCompleted) and done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (1, 2)


def test_usage_update_is_a_context_status() -> None:
    codec = _ready()
    (ev,) = codec.decode(_update("usage_update", used=15, size=258400, cost={"amount": 0.01, "currency": "USD"}))
    assert isinstance(ev, Status) and ev.kind == "context"
    assert ev.detail == {"used": 15, "size": 258400, "cost": {"amount": 0.01, "currency": "USD"}}
    assert ev.label == "context: 15 of 258400 tokens"
    (bad,) = codec.decode(_update("usage_update", used="many"))
    assert isinstance(bad, RawEvent) and bad.name == "usage_update"


def test_an_update_for_an_unannounced_tool_call_announces_it() -> None:
    # Gemini CLI: session/request_permission, then only tool_call_update (never tool_call).
    codec = _ready()
    update = {"toolCallId": "c1", "status": "completed", "title": "touch x", "kind": "execute", "content": []}
    use, result = codec.decode(_update("tool_call_update", **update))
    assert isinstance(use, ToolUse) and (use.id, use.name, use.summary) == ("c1", "execute", "touch x")
    assert isinstance(result, ToolResult) and result.tool_use_id == "c1"
    (again,) = codec.decode(_update("tool_call_update", toolCallId="c1", status="completed"))
    assert isinstance(again, ToolResult)
    # An announced call is not announced twice.
    use, _ = codec.decode(_update("tool_call", toolCallId="c2", title="ls", kind="read", status="in_progress")), None
    assert [type(ev) for ev in use] == [ToolUse]
    (status,) = codec.decode(_update("tool_call_update", toolCallId="c2", status="in_progress"))
    assert isinstance(status, Status)


def test_an_rpc_errors_data_reason_is_kept() -> None:
    codec = AcpHostCodec()
    codec.start(resume=SID, model=None, cwd="/tmp")
    codec.encode_turn(Turn.text("hi"))
    codec.decode(
        {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}}
    )
    codec.drain_output()
    error = {"code": -32603, "message": "Internal error", "data": {"details": "No previous sessions found."}}
    (failed,) = codec.decode({"jsonrpc": "2.0", "id": 1, "error": error})
    assert isinstance(failed, TurnFailed) and failed.code == "acp_session_load_failed"
    assert failed.message == "Internal error: No previous sessions found."
