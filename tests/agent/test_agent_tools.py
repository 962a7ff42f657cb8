"""The tool loop of ``agentrt agent``: a fixture tool plugin in the child, a replay provider."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from reference_agent_helpers import agent_env, run_once, text_round, tool_round, user_line

from agentrt.agent import turn_identity
from agentrt.testing import ReplayResponse, serve_replay


def _results(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line["type"] == "result"]


async def test_tool_round_then_text(tmp: Path) -> None:
    script = [
        ReplayResponse.sse(tool_round(("call_1", "echo", {"q": "ping", "n": 1}), usage=(10, 3))),
        ReplayResponse.sse(text_round("pong", usage=(20, 4))),
    ]
    async with serve_replay(script) as server:
        env = agent_env(tmp, server.url, tools=True, AGENTRT_SYSTEM_PROMPT="sys")
        status, lines, stderr = await run_once(env, user_line("use the tool"))
        first, second = server.requests
    assert status == 0, stderr
    init = lines[0]
    assert init["tools"] == ["crash", "echo", "fail"]
    sid = init["session_id"]
    tool_use = [line for line in lines if line["type"] == "assistant"]
    assert tool_use == [{
        "type": "assistant",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "echo", "input": {"q": "ping", "n": 1}}]},
        "session_id": sid,
    }]
    (result,) = _results(lines)
    assert result["result"] == "pong"
    assert result["usage"] == {"input_tokens": 30, "output_tokens": 7}  # summed over both rounds

    # Every offered tool went to the provider in OpenAI function shape.
    assert sorted(t["function"]["name"] for t in first.json["tools"]) == ["crash", "echo", "fail"]
    request_messages = first.json["messages"]
    assert request_messages == [{"role": "system", "content": "sys"}, {"role": "user", "content": "use the tool"}]
    assistant, tool = second.json["messages"][2:]
    assert assistant == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": '{"q":"ping","n":1}'}}]}
    assert (tool["role"], tool["tool_call_id"], tool["name"]) == ("tool", "call_1", "echo")
    payload = json.loads(tool["content"])
    assert payload == {
        "echo": {"q": "ping", "n": 1},
        "session_id": sid,
        "turn_identity": turn_identity(request_messages),
        "tool_call_id": "call_1",
    }
    # The history keeps only the user text and the final answer.
    saved = orjson.loads((tmp / "state" / f"{sid}.json").read_bytes())
    assert saved["messages"] == [{"role": "user", "content": "use the tool"}, {"role": "assistant", "content": "pong"}]


async def test_unknown_failing_and_crashing_tools_continue_the_turn(tmp: Path) -> None:
    script = [
        ReplayResponse.sse(tool_round(("a", "nope", {}), ("b", "fail", {}), ("c", "crash", {}))),
        ReplayResponse.sse(text_round("recovered")),
    ]
    async with serve_replay(script) as server:
        status, lines, _ = await run_once(agent_env(tmp, server.url, tools=True), user_line("go"))
        tool_messages = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert status == 0
    assert _results(lines)[0]["result"] == "recovered"
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in tool_messages] == [
        ("a", {"error": "unknown_managed_tool"}),
        ("b", {"error": "fixture_tool_failed"}),
        ("c", {"error": "tool_failed"}),
    ]


async def test_tool_call_without_offered_tools(tmp: Path) -> None:
    script = [ReplayResponse.sse(tool_round(("a", "echo", {})))]
    async with serve_replay(script) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url), user_line("go"))
        assert "tools" not in server.requests[0].json
    assert _results(lines)[0]["result"] == "provider_requested_unavailable_tool"


async def test_round_limit(tmp: Path) -> None:
    script = [ReplayResponse.sse(tool_round((f"c{i}", "echo", {}))) for i in range(4)]
    async with serve_replay(script) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url, tools=True), user_line("loop"))
        assert len(server.requests) == 4 and server.unexpected == 0
    assert _results(lines)[-1]["result"] == "managed_tool_round_limit"
    assert len([line for line in lines if line["type"] == "assistant"]) == 4


async def test_cumulative_call_limit(tmp: Path) -> None:
    script = [
        ReplayResponse.sse(tool_round(("c1", "echo", {}), ("c2", "echo", {}), ("c3", "echo", {}))),
        ReplayResponse.sse(tool_round(("c4", "echo", {}), ("c5", "echo", {}))),
    ]
    async with serve_replay(script) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url, tools=True), user_line("many"))
        assert len(server.requests) == 2
    assert _results(lines)[-1]["result"] == "managed_tool_call_limit"


async def test_partial_tool_configuration_stops_startup(tmp: Path) -> None:
    env = agent_env(tmp, "http://127.0.0.1:9", tools=True, AGENTRT_TEST_TOOLS="partial")
    status, lines, _ = await run_once(env, user_line("hi"))
    reason = lines[0].pop("errors", None) if lines else None
    assert (status, lines) == (1, [{"type": "result", "subtype": "startup_error", "is_error": True,
                                    "result": "fixture_tool_configuration_incomplete"}])
    assert isinstance(reason, list) and len(reason) == 1 and reason[0].strip()  # why, in words


async def test_invalid_tool_arguments_fail_the_turn(tmp: Path) -> None:
    script = [ReplayResponse.sse(tool_round(("c1", "echo", "{not json")))]
    async with serve_replay(script) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url, tools=True), user_line("x"))
        assert len(server.requests) == 1
    assert _results(lines)[-1]["result"] == "provider_tool_arguments_invalid_json"


async def test_managed_task_tool_is_offered_only_when_configured(tmp: Path) -> None:
    base = {"AGENTRT_LOAD_PLUGINS": "openai,awp-jsonl,managed-task"}
    env = agent_env(tmp, "http://127.0.0.1:9", **base, AWP_AGENT_MANAGED_TASKS_OPT_IN="1")
    status, lines, _ = await run_once(env, b"")
    assert (status, [line["result"] for line in lines]) == (1, ["managed_tasks_configuration_incomplete"])
    async with serve_replay([ReplayResponse.sse(text_round("no tool needed"))]) as server:
        env = agent_env(
            tmp, server.url, **base,
            AWP_AGENT_MANAGED_TASKS_OPT_IN="1",
            AWP_CONTROL_PLANE_URL="http://127.0.0.1:8100",
            AWP_CONTROL_PLANE_API_KEY="k" * 32,
        )
        status, lines, _ = await run_once(env, user_line("hi"))
        offered = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert status == 0
    assert lines[0]["tools"] == ["awp_run_managed_task"] and offered == ["awp_run_managed_task"]
    assert "k" * 32 not in json.dumps(lines)
