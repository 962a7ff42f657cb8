"""End to end: agentrt hosts ``agentrt agent`` over awp-jsonl against a replay provider."""

from __future__ import annotations

import os
from pathlib import Path

from reference_agent_helpers import AGENTRT_SCRIPT, PLUGIN_DIR, text_round, tool_round

from agentrt import LaunchSpec, open_conversation
from agentrt.events import EventBatch, SessionStarted, TextDelta, ToolUse, TurnCompleted
from agentrt.testing import ReplayResponse, serve_replay


class _Collect:
    """A sink that keeps every batch (to check fan-out and ordering)."""

    name = "collect"
    policy = "block"
    buffer_size = 64

    def __init__(self) -> None:
        self.batches: list[EventBatch] = []

    async def handle(self, batch: EventBatch) -> None:
        self.batches.append(batch)

    async def aclose(self) -> None:
        pass


async def test_host_drives_reference_agent_and_resumes(tmp: Path) -> None:
    assert os.path.isfile(AGENTRT_SCRIPT) and not os.path.islink(AGENTRT_SCRIPT)
    tool = ReplayResponse.sse(tool_round(("call-7", "echo", {"x": 1}), usage=(5, 1)))
    first = ReplayResponse.sse(text_round("real", "-1", "-model", usage=(12, 2)), chunk_delay=0.01)
    second = ReplayResponse.sse(text_round("again", usage=(30, 1)))
    parent_env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "LANG": "C.UTF-8"}
    async with serve_replay([tool, first, second]) as server:
        launch = LaunchSpec(
            executable=AGENTRT_SCRIPT,
            prefix_args=("agent",),
            env_entries={
                "AGENTRT_API_BASE_URL": server.url + "/v1",
                "AGENTRT_STATE_DIR": str(tmp / "state"),
                "AGENTRT_MODEL": "replay-model",
                "AGENTRT_API_TOKEN": "e2e-token-0123456789",
                "AGENTRT_LOAD_PLUGINS": "openai,awp-jsonl",
                "PYTHONPATH": str(PLUGIN_DIR),
                "AGENTRT_PLUGIN_MODULES": "agent_test_tools",
                "AGENTRT_TEST_TOOLS": "1",
            },
            protocol="awp-jsonl",
            model="replay-model",
        )
        sink = _Collect()
        async with open_conversation(launch, parent_env=parent_env, sinks=[sink], cwd=str(tmp)) as conv:
            events = [ev async for ev in conv.send("Say hello")]
            session_id = conv.session_id
        deltas = [ev.text for ev in events if isinstance(ev, TextDelta)]
        assert deltas == ["real", "-1", "-model"]
        uses = [ev for ev in events if isinstance(ev, ToolUse)]
        assert [(u.id, u.name, dict(u.input)) for u in uses] == [("call-7", "echo", {"x": 1})]
        assert events.index(uses[0]) < next(i for i, ev in enumerate(events) if isinstance(ev, TextDelta))
        terminal = events[-1]
        assert isinstance(terminal, TurnCompleted)
        assert terminal.result == "real-1-model"
        assert terminal.usage is not None and terminal.usage.to_dict() == {"input_tokens": 17, "output_tokens": 3}
        assert session_id is not None and terminal.session_id == session_id
        seen = [ev for batch in sink.batches for ev in batch.events]
        assert any(isinstance(ev, SessionStarted) and ev.session_id == session_id for ev in seen)
        assert [ev.text for ev in seen if isinstance(ev, TextDelta)] == deltas
        request = server.requests[1]
        assert request.json["messages"][-1]["role"] == "tool"
        assert request.path == "/v1/chat/completions"
        assert request.header("authorization") == "Bearer e2e-token-0123456789"

        # A second conversation (a new process) resumes the native session.
        async with open_conversation(launch, parent_env=parent_env, resume=session_id, cwd=str(tmp)) as conv:
            result = await conv.ask("And again?")
            assert conv.session_id == session_id
        assert isinstance(result, TurnCompleted) and result.result == "again"
        assert server.requests[2].json["messages"] == [
            {"role": "user", "content": "Say hello"},
            {"role": "assistant", "content": "real-1-model"},
            {"role": "user", "content": "And again?"},
        ]
    saved = (tmp / "state" / f"{session_id}.json").read_bytes()
    assert b"e2e-token" not in saved and b"And again?" in saved
