#!/usr/bin/env python3
"""An example agent CLI speaking the AWP agent protocol (awp-jsonl), stdlib only.

It is an example, not a model: it streams back what it was told, word by word.
It follows the contract: nothing on stdout before the first input, a
``system/init`` with a resumable session id, streamed text deltas, exactly one
``result`` per turn, a clean exit on ``{"type":"shutdown"}`` or end of input.

    AWP_AGENT_CLI_EXECUTABLE=$PWD/docs/examples/echo_agent.py .venv/bin/agentrt run "hello there"
"""

import json
import sys
import uuid


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main(argv):
    model, session = "echo-1", None
    args = iter(argv)
    for arg in args:
        if arg == "--model":
            model = next(args, model)
        elif arg == "--resume":
            session = next(args, None)
        elif arg == "--mcp-config":
            next(args, None)  # consumed and ignored, as the contract allows
    session = session or str(uuid.uuid4())
    started = False
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if msg.get("type") == "shutdown":
            break
        blocks = msg.get("message", {}).get("content", [])
        text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if not started:
            emit({"type": "system", "subtype": "init", "session_id": session, "model": model})
            started = True
        reply = f"You said: {text}"
        emit({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        words = reply.split(" ")
        for i, word in enumerate(words):
            # A space between words, none after the last: the text is exactly the reply.
            piece = word if i == len(words) - 1 else word + " "
            emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
        emit({"type": "content_block_stop", "index": 0})
        words = len(text.split())
        emit({"type": "result", "subtype": "success", "is_error": False, "session_id": session,
              "result": reply, "usage": {"input_tokens": words, "output_tokens": words + 2}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
