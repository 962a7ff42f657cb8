"""Fixture agent CLI (awp-jsonl, stdlib only) that replies slowly enough to interrupt.

* a prompt starting with ``slow``: 200 text deltas ``tick N``, 50 ms apart (the
  sleep paces this child, not the test);
* any other prompt: a Bash tool_use, then a Markdown reply naming the prompt and,
  when started with ``--resume ID``, ``(resumed from ID)``;
* exits 0 on ``{"type":"shutdown"}`` or end of input.
"""

import json
import os
import sys
import time


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    pid_file = os.environ.get("SLOW_AGENT_PID_FILE")
    if pid_file:  # lets a test check that every agent process it caused has ended
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    args = sys.argv[1:]
    model = args[args.index("--model") + 1] if "--model" in args else "slow-model"
    resume = args[args.index("--resume") + 1] if "--resume" in args else None
    session = resume or "slow-" + os.urandom(6).hex()
    first = True
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") == "shutdown":
            return
        prompt = "".join(b.get("text", "") for b in msg["message"]["content"] if b.get("type") == "text")
        if first:
            out({"type": "system", "subtype": "init", "session_id": session, "model": model})
            first = False
        out({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        if prompt.startswith("slow"):
            for i in range(200):
                out({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                                          "text": f"tick {i} "}})
                time.sleep(0.05)
        else:
            out({"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "tool-1", "name": "Bash", "input": {"command": "ls -la"}}]}})
            text = f"reply to: **{prompt}**"
            if resume:
                text += f" (resumed from {resume})"
            for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                out({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
        out({"type": "content_block_stop", "index": 0})
        out({"type": "result", "subtype": "success", "is_error": False, "session_id": session,
             "usage": {"input_tokens": 7, "output_tokens": 3}})


if __name__ == "__main__":
    main()
