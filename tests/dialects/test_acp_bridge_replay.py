"""``session/load`` on ``agentrt bridge --to acp`` replays the recorded history before it answers.

Real parts: two bridge processes in turn (real subprocesses, JSON-RPC lines
on their pipes), each hosting the stream-json fixture agent
(``agentrt_stream_json.fixture_agent``, mode ``cwd``: each reply is a JSON object
naming its working directory and the ``--resume`` id), recording into the
real SQLite database under the bridge's ``HOME``.  The first bridge runs two
turns; the second loads the session and must send the client both prompts as
``user_message_chunk`` and both replies as ``agent_message_chunk``, in order,
before the ``session/load`` response.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..plugin_data import CLAUDE_CODE_CAPTURES, STREAM_JSON_AGENT

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = STREAM_JSON_AGENT
BOUND = 60  # hang guard only


CAPTURE = CLAUDE_CODE_CAPTURES / "tool_use_allowed.stdout.jsonl"


def _env(tmp_path: Path, mode: str = "cwd") -> dict[str, str]:
    exe = tmp_path / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[agents.fx]\nexecutable = "{exe}"\nprotocol = "stream-json"\n'
        f'env = {{ STREAM_JSON_FIXTURE_MODE = "{mode}", STREAM_JSON_FIXTURE_CAPTURE = "{CAPTURE}" }}\n'
    )
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "AGENTRT_CONFIG": str(config)}


class _Bridge:
    """A bridge subprocess spoken to in JSON-RPC lines; every line it wrote is kept, in order."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [AGENTRT, "bridge", "--to", "acp", "-a", "fx"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
        )  # fmt: skip
        self.seen: list[dict[str, Any]] = []
        self._next = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; read lines until its response, which is returned (the lines before it are in seen)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._next += 1
        rid = self._next
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        for raw in self.proc.stdout:
            obj = json.loads(raw)
            self.seen.append(obj)
            if obj.get("id") == rid and "method" not in obj:
                return obj
        raise AssertionError(f"the bridge closed its output before answering {method}: {self.seen[-5:]}")

    def close(self) -> str:
        _out, err = self.proc.communicate(timeout=BOUND)
        assert self.proc.returncode == 0, err
        return err


def _updates(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for obj in lines:
        if obj.get("method") == "session/update":
            update = obj["params"]["update"]
            out.append((update["sessionUpdate"], update.get("content", {}).get("text", "")))
    return out


def test_session_load_replays_prompts_and_replies_in_order_before_answering(tmp_path: Path) -> None:
    env = _env(tmp_path)
    work = str(tmp_path)
    first = _Bridge(env)
    first.call("initialize", {"protocolVersion": 1})
    sid = first.call("session/new", {"cwd": work, "mcpServers": []})["result"]["sessionId"]
    replies = []
    for text in ("first question", "second question"):
        start = len(first.seen)
        answer = first.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        assert answer["result"]["stopReason"] == "end_turn", answer
        replies.append("".join(t for kind, t in _updates(first.seen[start:]) if kind == "agent_message_chunk"))
    first.close()
    assert all(json.loads(r)["cwd"] == work for r in replies), replies

    second = _Bridge(env)
    assert second.call("initialize", {"protocolVersion": 1})["result"]["agentCapabilities"]["loadSession"] is True
    start = len(second.seen)
    loaded = second.call("session/load", {"sessionId": sid, "cwd": work, "mcpServers": []})
    assert "result" in loaded, loaded
    before = second.seen[start:-1]  # everything the client got before the load's response
    assert all(o["params"]["sessionId"] == sid for o in before if o.get("method") == "session/update")
    replayed = _updates(before)
    merged: list[tuple[str, str]] = []  # consecutive chunks of one message, joined
    for kind, text in replayed:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    assert merged == [
        ("user_message_chunk", "first question"),
        ("agent_message_chunk", replies[0]),
        ("user_message_chunk", "second question"),
        ("agent_message_chunk", replies[1]),
    ], replayed
    # The session goes on after the replay: a third turn resumes the hosted CLI's session.
    answer = second.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "third"}]})
    assert answer["result"]["stopReason"] == "end_turn"
    second.close()


def test_session_load_replays_tool_calls_where_they_happened(tmp_path: Path) -> None:
    """A real Claude Code capture (text, Bash tool use, its result, text): replayed in that order."""
    env = _env(tmp_path, mode="replay")
    first = _Bridge(env)
    first.call("initialize", {"protocolVersion": 1})
    sid = first.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
    start = len(first.seen)
    answer = first.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "run it"}]})
    assert answer["result"]["stopReason"] == "end_turn", answer
    live = [o["params"]["update"] for o in first.seen[start:] if o.get("method") == "session/update"]
    first.close()

    second = _Bridge(env)
    second.call("initialize", {"protocolVersion": 1})
    start = len(second.seen)
    assert "result" in second.call("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    replayed = [o["params"]["update"] for o in second.seen[start:-1] if o.get("method") == "session/update"]
    second.close()
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds[0] == "user_message_chunk" and replayed[0]["content"]["text"] == "run it"
    assert "tool_call" in kinds and "tool_call_update" in kinds
    assert kinds.index("agent_message_chunk") < kinds.index("tool_call") < kinds.index("tool_call_update")
    assert kinds[-1] == "agent_message_chunk"
    # The tool call replays as it was sent live: same id, kind, input and result.
    tool = [u for u in replayed if u["sessionUpdate"].startswith("tool_call")]
    assert tool == [u for u in live if u["sessionUpdate"].startswith("tool_call")]
    assert tool[0]["kind"] == "execute"


def test_session_load_with_nothing_recorded_replays_nothing_and_answers(tmp_path: Path) -> None:
    bridge = _Bridge(_env(tmp_path))
    bridge.call("initialize", {"protocolVersion": 1})
    start = len(bridge.seen)
    loaded = bridge.call("session/load", {"sessionId": "never-seen", "cwd": str(tmp_path), "mcpServers": []})
    assert "result" in loaded, loaded
    assert _updates(bridge.seen[start:]) == []
    bridge.close()
