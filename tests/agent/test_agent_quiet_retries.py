"""``agentrt agent`` run directly: a retried request leaves no library log line on the user's screen."""

from __future__ import annotations

from pathlib import Path

from reference_agent_helpers import agent_env, run_once, text_round, user_line

from agentrt.testing import ReplayResponse, serve_replay


async def test_a_retried_request_prints_no_library_log_line(tmp: Path) -> None:
    script = [ReplayResponse.json({"error": "busy"}, status=503, headers=[("retry-after", "0")]),
              ReplayResponse.sse(text_round("fine"))]
    async with serve_replay(script) as server:
        status, lines, stderr = await run_once(agent_env(tmp, server.url), user_line("hi"), limit=60)
        assert len(server.requests) == 2  # the first answer was retried
    assert status == 0
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == "fine"
    assert b"stamina" not in stderr and b"retry_scheduled" not in stderr, stderr
