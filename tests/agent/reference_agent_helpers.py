"""Helpers for the reference-agent tests (imported by the test modules): run ``agentrt agent`` as a real child process.

The child gets a small explicit environment (never the test's own), the
built-in awp-jsonl and openai plugins, and, when asked, the fixture tool
plugin in ``tests/agent/plugins`` through ``AGENTRT_PLUGIN_MODULES``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

PLUGIN_DIR = Path(__file__).parent / "plugins"
AGENTRT_SCRIPT = str(Path(sys.executable).parent / "agentrt")
READ_LIMIT = 15.0


def sse(*events: Any, done: bool = True) -> list[bytes]:
    """SSE body chunks: one ``data:`` event per object (dicts are JSON-encoded)."""
    out = [b"data: " + (e if isinstance(e, bytes) else orjson.dumps(e)) + b"\n\n" for e in events]
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def text_round(*pieces: str, usage: tuple[int, int] | None = None) -> list[bytes]:
    """An OpenAI stream answering with ``pieces`` of text (and a usage chunk)."""
    events: list[Any] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        events.append({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    return sse(*events)


def tool_round(*calls: tuple[str, str, Any], usage: tuple[int, int] | None = None) -> list[bytes]:
    """An OpenAI stream asking for tool ``calls`` (id, name, arguments), arguments in two pieces."""
    events: list[Any] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        half = len(text) // 2
        events.append(
            {"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "id": call_id, "type": "function",
                 "function": {"name": name, "arguments": text[:half]}}]}}]}
        )
        events.append(
            {"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": text[half:]}}]}}]}
        )
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    if usage is not None:
        events.append({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    return sse(*events)


def user_line(content: Any) -> bytes:
    """One awp-jsonl user turn line."""
    return orjson.dumps({"type": "user", "message": {"role": "user", "content": content}}) + b"\n"


def agent_env(tmp: Path, url: str | None = None, *, tools: bool = False, **extra: str) -> dict[str, str]:
    """The child's complete environment (an explicit allowlist, as a host builds it)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "AGENTRT_LOAD_PLUGINS": "openai,awp-jsonl,stream-json",
        "AGENTRT_MODEL": "test-model",
        "AGENTRT_STATE_DIR": str(tmp / "state"),
    }
    if url is not None:
        env["AGENTRT_API_BASE_URL"] = url + "/v1"
    if tools:
        env["PYTHONPATH"] = str(PLUGIN_DIR)
        env["AGENTRT_PLUGIN_MODULES"] = "agent_test_tools"
        env["AGENTRT_TEST_TOOLS"] = "1"
    env.update(extra)
    return env


class AgentChild:
    """A running ``agentrt agent`` with line-level helpers (every wait bounded)."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self._buf = bytearray()
        self.lines: list[dict[str, Any]] = []

    async def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data)

    async def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()

    async def line(self, limit: float = READ_LIMIT) -> dict[str, Any] | None:
        """The next stdout line parsed, or ``None`` at EOF."""
        assert self.proc.stdout is not None
        with trio.fail_after(limit):
            while b"\n" not in self._buf:
                chunk = await self.proc.stdout.receive_some(65536)
                if not chunk:
                    assert not self._buf, f"unterminated output: {bytes(self._buf)[:200]!r}"
                    return None
                self._buf += chunk
        raw, _, rest = bytes(self._buf).partition(b"\n")
        self._buf[:] = rest
        obj = orjson.loads(raw)
        self.lines.append(obj)
        return obj

    async def until_result(self, limit: float = READ_LIMIT) -> list[dict[str, Any]]:
        """Lines up to and including the next ``result``."""
        out: list[dict[str, Any]] = []
        with trio.fail_after(limit):
            while True:
                obj = await self.line()
                assert obj is not None, f"EOF before result; got {out}"
                out.append(obj)
                if obj.get("type") == "result":
                    return out

    async def rest(self, limit: float = READ_LIMIT) -> list[dict[str, Any]]:
        """Every remaining line until EOF."""
        out: list[dict[str, Any]] = []
        with trio.fail_after(limit):
            while (obj := await self.line()) is not None:
                out.append(obj)
        return out

    async def wait(self, limit: float = READ_LIMIT) -> int:
        with trio.fail_after(limit):
            return await self.proc.wait()


@asynccontextmanager
async def run_agent(
    env: Mapping[str, str], *args: str, cwd: str | None = None
) -> AsyncIterator[AgentChild]:
    """Start ``agentrt agent *args``; always reaped on exit (SIGKILL after a bound)."""
    proc = await trio.lowlevel.open_process(
        [AGENTRT_SCRIPT, "agent", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
    )
    child = AgentChild(proc)
    stderr = bytearray()

    async def drain() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.receive_some(65536):
            stderr.extend(chunk)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            try:
                yield child
            finally:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(10):
                        if proc.stdin is not None:
                            await proc.stdin.aclose()
                        await proc.wait()
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
    finally:
        child.stderr = bytes(stderr)  # type: ignore[attr-defined]


async def run_once(
    env: Mapping[str, str], stdin: bytes, *args: str, limit: float = READ_LIMIT
) -> tuple[int, list[dict[str, Any]], bytes]:
    """Run the agent over a fixed stdin; return (status, output objects, stderr)."""
    with trio.fail_after(limit):
        done = await trio.run_process(
            [AGENTRT_SCRIPT, "agent", *args],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            env=dict(env),
            check=False,
        )
    assert done.stdout == b"" or done.stdout.endswith(b"\n")
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, lines, done.stderr
