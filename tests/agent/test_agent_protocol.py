"""``agentrt agent`` as a real child process: startup, turns, input errors, shutdown."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio
from reference_agent_helpers import agent_env, run_agent, run_once, text_round, user_line

from agentrt.agent._serve import DOCUMENT_FALLBACK
from agentrt.testing import ReplayResponse, serve_replay

STARTUP = {"type": "result", "subtype": "startup_error", "is_error": True}


def startup_error(code: str) -> dict[str, object]:
    return {**STARTUP, "result": code}


def reasons_dropped(lines: list[dict[str, object]]) -> list[dict[str, object]]:
    """``lines`` without the reason of each startup error, checked present: one non-empty line of text."""
    out = []
    for line in lines:
        if line.get("subtype") == "startup_error":
            line = dict(line)
            reason = line.pop("errors", None)
            assert isinstance(reason, list) and len(reason) == 1 and isinstance(reason[0], str), line
            assert reason[0].strip() and "\n" not in reason[0] and reason[0] != line["result"], reason
        out.append(line)
    return out


@pytest.mark.parametrize(
    ("args", "extra", "code"),
    [
        (("--bogus",), {}, "unsupported_argument:--bogus"),
        (("hello world",), {}, "unsupported_argument"),  # not code-shaped: the bare code
        (("--model", "m", "-p"), {}, "unsupported_argument:-p"),
        ((), {"AGENTRT_MODEL": ""}, "model_required"),
        ((), {"AGENTRT_MODEL": "a" * 257}, "model_required"),
        ((), {"AGENTRT_MODEL": "bad\x07model"}, "model_required"),
        ((), {"AGENTRT_API_BASE_URL": "http://example.com/v1"}, "remote_api_requires_https"),
        ((), {"AGENTRT_API_BASE_URL": "https://example.com/v1"}, "remote_api_requires_explicit_opt_in"),
        ((), {"AGENTRT_API_BASE_URL": "http://u:p@127.0.0.1/v1"},
         "api_base_url_must_not_contain_credentials_query_or_fragment"),
        ((), {"AGENTRT_API_TOKEN": "has space"}, "invalid_api_token"),
        ((), {"AGENTRT_TIMEOUT_MS": "999"}, "invalid_agentrt_timeout_ms"),
        ((), {"AGENTRT_TIMEOUT_MS": "600001"}, "invalid_agentrt_timeout_ms"),
        ((), {"AGENTRT_TIMEOUT_MS": "1e4"}, "invalid_agentrt_timeout_ms"),
        ((), {"AGENTRT_STATE_DIR": "relative/dir"}, "invalid_state_directory"),
        (("--resume", "../escape"), {}, "invalid_session_id"),
        (("--resume", "x" * 257), {}, "invalid_session_id"),
        (("--dialect", "no-such-dialect"), {}, "invalid_cli_protocol"),
        ((), {"AGENTRT_PROVIDER": "nope"}, "provider_unavailable"),
    ],
)
async def test_startup_errors_print_one_line_and_exit_1(
    tmp: Path, args: tuple[str, ...], extra: dict[str, str], code: str
) -> None:
    env = agent_env(tmp, "http://127.0.0.1:9", **extra)
    status, lines, _ = await run_once(env, b"", *args)
    assert (status, reasons_dropped(lines)) == (1, [startup_error(code)])


async def test_startup_order_model_before_endpoint(tmp: Path) -> None:
    # Two problems at once: the first in §B's order wins.
    env = agent_env(tmp, "http://example.com", AGENTRT_MODEL="")
    status, lines, _ = await run_once(env, b"")
    assert (status, reasons_dropped(lines)) == (1, [startup_error("model_required")])
    assert lines[0]["errors"] == ["pass --model or set AGENTRT_MODEL (1-256 printable characters)"]
    env = agent_env(tmp, "http://example.com", AGENTRT_TIMEOUT_MS="5")
    status, lines, _ = await run_once(env, b"", "--model", "m")
    assert (status, reasons_dropped(lines)) == (1, [startup_error("remote_api_requires_https")])


async def test_corrupt_session_is_a_startup_error(tmp: Path) -> None:
    state = tmp / "state"
    state.mkdir(mode=0o700)
    bad = state / "s1.json"
    bad.write_text("{not json")
    bad.chmod(0o600)
    env = agent_env(tmp, "http://127.0.0.1:9")
    status, lines, _ = await run_once(env, b"", "--resume", "s1")
    assert (status, reasons_dropped(lines)) == (1, [startup_error("invalid_session_state")])
    bad.chmod(0o644)
    status, lines, _ = await run_once(env, b"", "--resume", "s1")
    assert (status, reasons_dropped(lines)) == (1, [startup_error("unsafe_session_state_permissions")])


async def test_no_output_before_input_and_clean_eof(tmp: Path) -> None:
    # The provider is never contacted and nothing is printed without a turn.
    async with serve_replay([]) as server:
        status, lines, _ = await run_once(agent_env(tmp, server.url), b"")
        assert (status, lines) == (0, [])
        status, lines, _ = await run_once(agent_env(tmp, server.url), b'\n  \n{"type":"shutdown"}\n')
        assert (status, lines) == (0, [])
        assert server.requests == []


async def test_contract_arguments_are_consumed(tmp: Path) -> None:
    body = text_round("ok")
    async with serve_replay([ReplayResponse.sse(body)]) as server:
        args = ("--output-format", "stream-json", "--input-format", "stream-json", "--print", "--verbose",
                "--model", "from-argv", "--mcp-config", str(tmp / "mcp.json"))
        status, lines, _ = await run_once(agent_env(tmp, server.url), user_line("hi"), *args)
        assert status == 0
        assert lines[0]["model"] == "from-argv"
        assert lines[-1]["result"] == "ok"
        assert server.requests[0].json["model"] == "from-argv"


async def test_turn_streams_and_reports_usage(tmp: Path) -> None:
    async with serve_replay([ReplayResponse.sse(text_round("Hel", "lo", usage=(12, 2)))]) as server:
        status, lines, _ = await run_once(agent_env(tmp, server.url), user_line("hi"))
    assert status == 0
    init, *stream, result = lines
    sid = init["session_id"]
    assert init == {"type": "system", "subtype": "init", "session_id": sid, "model": "test-model",
                    "cwd": init["cwd"], "tools": []}
    assert stream == [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
    ]
    assert result["subtype"] == "success" and result["is_error"] is False
    assert (result["session_id"], result["result"], result["usage"]) == (
        sid, "Hello", {"input_tokens": 12, "output_tokens": 2})


async def test_usage_key_omitted_when_provider_reports_none(tmp: Path) -> None:
    async with serve_replay([ReplayResponse.sse(text_round("x"))]) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url), user_line("hi"))
    assert lines[-1]["result"] == "x" and "usage" not in lines[-1]


async def test_non_streaming_json_answer(tmp: Path) -> None:
    whole = ReplayResponse.json({"choices": [{"message": {"role": "assistant", "content": "whole"}}],
                                 "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
    async with serve_replay([whole]) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url), user_line("hi"))
    assert [line["type"] for line in lines] == [
        "system", "content_block_start", "content_block_delta", "content_block_stop", "result"]
    assert (lines[-1]["result"], lines[-1]["usage"]) == ("whole", {"input_tokens": 5, "output_tokens": 1})


async def test_bad_input_lines_are_per_turn_errors(tmp: Path) -> None:
    big = b'{"type":"user","message":{"role":"user","content":"' + b"a" * (32 * 1024 * 1024) + b'"}}\n'
    stdin = b"".join([
        b"not json\n",
        b'{"type":"assistant"}\n',
        b"[1,2]\n",
        b'{"type":"user","message":{"role":"user","content":42}}\n',
        b'{"type":"user","message":{"role":"user","content":[{"type":"video"}]}}\n',
        big,
        user_line([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
    ])
    async with serve_replay([ReplayResponse.sse(text_round("fine"))]) as server:
        status, lines, _ = await run_once(agent_env(tmp, server.url), stdin, limit=60)
        assert status == 0
        errors = [line["result"] for line in lines if line.get("is_error")]
        assert errors == ["invalid_input_json", "invalid_input_message", "invalid_input_message",
                          "invalid_input_content", "empty_input_content", "input_message_oversize"]
        # The valid turn after them still runs, and init comes only with it.
        kinds = [line["type"] for line in lines]
        assert kinds.index("system") == 6
        assert lines[-1]["result"] == "fine"
        assert server.requests[0].json["messages"] == [{"role": "user", "content": "a\nb"}]


async def test_image_and_document_blocks(tmp: Path) -> None:
    # The fallback text is the original reference agent's, word for word.
    assert DOCUMENT_FALLBACK == "[A document attachment was supplied but this reference adapter does not decode PDFs.]"
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"}},
        {"type": "text", "text": "what is this?"},
    ]
    async with serve_replay([ReplayResponse.sse(text_round("a picture"))]) as server:
        _, lines, _ = await run_once(agent_env(tmp, server.url), user_line(content))
        sent = server.requests[0].json["messages"][-1]
    assert lines[-1]["result"] == "a picture"
    assert sent == {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        {"type": "text", "text": DOCUMENT_FALLBACK},
        {"type": "text", "text": "what is this?"},
    ]}


@pytest.mark.parametrize(
    ("response", "code"),
    [
        (ReplayResponse.json({"error": "no"}, status=401), "provider_http_401"),
        (ReplayResponse(status=302, headers=[("location", "http://127.0.0.1:1/"), ("content-length", "0")]),
         "provider_redirect_rejected"),
        (ReplayResponse.sse(b'data: {"choices":[{"delta":{}, "finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'),
         "provider_returned_empty_text"),
    ],
)
async def test_provider_failures_are_error_results(tmp: Path, response: ReplayResponse, code: str) -> None:
    async with serve_replay([response, ReplayResponse.sse(text_round("again"))]) as server:
        status, lines, _ = await run_once(agent_env(tmp, server.url), user_line("one") + user_line("two"))
    assert status == 0
    results = [line for line in lines if line["type"] == "result"]
    assert [r["is_error"] for r in results] == [True, False]
    assert results[0]["result"] == code and results[0]["subtype"] == "error"
    assert results[0]["session_id"] == results[1]["session_id"]
    # A failed turn is not remembered: the second request holds only the second prompt.
    assert server.requests[-1].json["messages"] == [{"role": "user", "content": "two"}]


async def test_provider_timeout(tmp: Path) -> None:
    slow = ReplayResponse.sse(text_round("late"), delay=30)
    async with serve_replay([slow]) as server:
        env = agent_env(tmp, server.url, AGENTRT_TIMEOUT_MS="1000")
        status, lines, _ = await run_once(env, user_line("hi"))
    assert status == 0 and lines[-1]["result"] == "provider_timeout"


async def test_turns_are_sequential_and_history_grows(tmp: Path) -> None:
    rounds = [ReplayResponse.sse(text_round(f"answer {i}", usage=(i, 1))) for i in range(3)]
    async with serve_replay(rounds) as server, run_agent(agent_env(tmp, server.url)) as agent:
        # All three turns written at once: each is answered before the next is read.
        await agent.send(user_line("q0") + user_line("q1") + user_line("q2"))
        results = [(await agent.until_result())[-1] for _ in range(3)]
        await agent.close_stdin()
        assert await agent.wait() == 0
    assert [r["result"] for r in results] == ["answer 0", "answer 1", "answer 2"]
    assert [m["content"] for m in server.requests[2].json["messages"]] == [
        "q0", "answer 0", "q1", "answer 1", "q2"]
    init_lines = [line for line in agent.lines if line["type"] == "system"]
    assert len(init_lines) == 1


async def test_system_prompt_leads_the_messages(tmp: Path) -> None:
    async with serve_replay([ReplayResponse.sse(text_round("ok"))]) as server:
        env = agent_env(tmp, server.url, AGENTRT_SYSTEM_PROMPT="  be brief \n")
        await run_once(env, user_line("hi"))
    assert server.requests[0].json["messages"] == [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize("signum", [signal.SIGTERM])
async def test_sigterm_mid_turn_exits_cleanly(tmp: Path, signum: int) -> None:
    hanging = ReplayResponse.sse(text_round("never"), delay=60)
    async with serve_replay([hanging]) as server, run_agent(agent_env(tmp, server.url)) as agent:
        await agent.send(user_line("hi"))
        assert (await agent.line())["subtype"] == "init"  # type: ignore[index]
        await server.wait_for_requests(1)
        agent.proc.send_signal(signum)
        assert await agent.wait(limit=10) == 0


async def test_shutdown_line_after_turns(tmp: Path) -> None:
    async with serve_replay([ReplayResponse.sse(text_round("bye"))]) as server:
        stdin = user_line("hi") + b'{"type":"shutdown"}\n' + user_line("never read")
        status, lines, _ = await run_once(agent_env(tmp, server.url), stdin)
        assert status == 0 and len(server.requests) == 1
    assert lines[-1]["result"] == "bye"


async def test_token_never_leaks(tmp: Path) -> None:
    token = "tok-Zq81xDistinctive-secret-4711"
    script = [ReplayResponse.sse(text_round("fine")), ReplayResponse.json({"error": token}, status=500),
              ReplayResponse.dropped()]
    async with serve_replay(script) as server:
        env = agent_env(tmp, server.url, AGENTRT_API_TOKEN=token)
        stdin = user_line("a") + user_line("b") + user_line("c")
        status, lines, stderr = await run_once(env, stdin, limit=60)
        assert server.requests[0].header("authorization") == f"Bearer {token}"
    assert status == 0
    assert [line["is_error"] for line in lines if line["type"] == "result"] == [False, True, True]
    blob = json.dumps(lines).encode() + stderr
    for root, _, files in os.walk(tmp / "state"):
        for name in files:
            blob += (Path(root) / name).read_bytes()
    assert token.encode() not in blob
    # ... and not in argv: the agent's command line is only what the test passed.


async def test_stream_json_dialect_on_request(tmp: Path) -> None:
    async with serve_replay([ReplayResponse.sse(text_round("hi there"))]) as server:
        status, lines, _ = await run_once(agent_env(tmp, server.url), user_line("hi"), "--dialect", "stream-json")
    assert status == 0
    assert lines[0]["type"] == "system" and lines[-1]["type"] == "result"
    assert lines[-1]["result"] == "hi there"


async def test_sigterm_while_idle(tmp: Path) -> None:
    async with serve_replay([]) as server, run_agent(agent_env(tmp, server.url)) as agent:
        # An invalid line gets an answer: from then on the agent is reading stdin.
        await agent.send(b"nonsense\n")
        assert (await agent.line())["result"] == "invalid_input_json"  # type: ignore[index]
        agent.proc.send_signal(signal.SIGTERM)
        assert await agent.wait(limit=10) == 0
    await trio.lowlevel.checkpoint()
