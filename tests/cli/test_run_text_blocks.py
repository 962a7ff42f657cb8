"""Plain `agentrt run` output separates text blocks: a tool call or another block index starts a new line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGENTRT = str(Path(sys.executable).with_name("agentrt"))

AGENT = """
import json, sys
def out(o):
    sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    if json.loads(line).get("type") == "shutdown":
        break
    out({"type": "system", "subtype": "init", "session_id": "s1", "model": "m"})
    out({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "I will run a command."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}}]}})
    out({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "hi"}]}})
    out({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "The tool said: hi"}]}})
    out({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " and"}})
    out({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Another block.\\n"}})
    out({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "A third."}})
    out({"type": "result", "subtype": "success", "is_error": False, "session_id": "s1"})
"""


def test_text_blocks_are_not_glued_together(tmp_path: Path) -> None:
    exe = tmp_path / "agent"
    exe.write_text(f"#!{sys.executable}\n{AGENT}")
    exe.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "AWP_AGENT_CLI_EXECUTABLE": str(exe)}
    done = subprocess.run([AGENTRT, "run", "--no-log", "hi"], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    # Deltas of one block stay together; a block ending in a newline gets no second one.
    assert done.stdout == "I will run a command.\nThe tool said: hi and\nAnother block.\nA third.\n"
