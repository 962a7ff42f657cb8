"""A fixture agent CLI (awp-jsonl) for the web UI tests; the prompt picks the behaviour.

Standard library only.  Arguments: ``--argv-log FILE`` (each start appends its
argv as one JSON line), ``--resume ID``, ``--model M``.  Prompts:

``slow N``      N text deltas ("w0 w1 ..."), 0.15 s apart (pacing emulates a model)
``tool``        a Bash tool call (tool_use, then its tool_result), then text
``fail``        a failed result with the stable code ``fixture_failure``
``hang``        a delta every 0.1 s, forever (only Stop ends it)
``xss``         a reply full of script-injection attempts
``rate``        a rate-limit event, then text
``crash``       one delta, then exit 3 in the middle of the turn
``bench N``     N tiny deltas as fast as possible (benchmark)
``first``       one delta "FIRST", then the result (benchmark: latency of a light turn)
``surrogate``   a delta holding half an emoji (an escaped lone surrogate), then more text
anything else   "echo: <prompt>" in two deltas
"""

from __future__ import annotations

import json
import os
import sys
import time

XSS = (
    "Hello **bold** and `code`.\n\n"
    "<script>window.__pwned = 1</script>\n\n"
    '<img src="x" onerror="window.__pwned = 2">\n\n'
    "[click me](javascript:window.__pwned=3) and [ok](https://example.com/)\n\n"
    '<a href="javascript:window.__pwned=4">raw link</a>\n'
)


def main() -> None:
    args = sys.argv[1:]
    resume = None
    log = None
    it = iter(args)
    for a in it:
        if a == "--resume":
            resume = next(it, None)
        elif a == "--argv-log":
            log = next(it, None)
        elif a == "--model":
            next(it, None)
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(args) + "\n")
        with open(log + ".pids", "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    out = sys.stdout
    session = resume or f"webfix-{os.urandom(8).hex()}"
    turns = 0

    def emit(obj: object) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    def delta(text: str) -> None:
        emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})

    def result(text: str) -> None:
        emit({"type": "result", "subtype": "success", "is_error": False, "session_id": session, "result": text,
              "usage": {"input_tokens": 7 * turns, "output_tokens": 3 * turns}})

    for raw in sys.stdin:
        raw = raw.strip()
        if not raw:
            continue
        msg = json.loads(raw)
        if msg.get("type") == "shutdown":
            break
        if msg.get("type") != "user":
            continue
        content = msg.get("message", {}).get("content")
        if isinstance(content, list):
            text = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        else:
            text = str(content or "")
        turns += 1
        if turns == 1:
            emit({"type": "system", "subtype": "init", "session_id": session, "model": "fixture-web", "tools": []})
        emit({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        words = text.split()
        if words[:1] == ["slow"]:
            n = int(words[1]) if len(words) > 1 else 10
            for i in range(n):
                delta(f"w{i} ")
                time.sleep(0.15)
            result("")
        elif words[:1] == ["bench"]:
            n = int(words[1]) if len(words) > 1 else 1000
            line = json.dumps({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": "x"}}) + "\n"
            # Stamp the first delta so the benchmark can time the path to the page.
            emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "FIRST "}})
            out.write(line * n)
            out.flush()
            result("")
        elif text == "first":
            delta("FIRST token")
            result("")
        elif text == "tool":
            emit({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls -la /secret/place"}}]}})
            time.sleep(0.3)
            emit({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "file-a\nfile-b", "is_error": False}]}})
            delta("The directory has two files.")
            result("")
        elif text == "fail":
            delta("partial before failure")
            emit({"type": "result", "subtype": "error_during_execution", "is_error": True,
                  "result": "fixture_failure", "errors": ["the fixture failed on purpose"], "session_id": session})
        elif text == "hang":
            i = 0
            while True:
                delta(f"tick{i} ")
                i += 1
                time.sleep(0.1)
        elif text == "crash":
            delta("about to crash")
            out.flush()
            os._exit(3)
        elif text == "surrogate":
            # json.dumps escapes the lone half, as JSON.stringify does after slice() cut an emoji.
            delta("before ")
            delta("cut \ud83d")
            delta(" after")
            result("")
        elif text == "xss":
            delta(XSS)
            result("")
        elif text == "rate":
            emit({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1700000000}})
            time.sleep(0.3)
            delta("after the rate limit")
            result("")
        else:
            reply = f"echo: {text}"
            half = max(1, len(reply) // 2)
            delta(reply[:half])
            delta(reply[half:])
            result("")
    sys.exit(0)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(0)
