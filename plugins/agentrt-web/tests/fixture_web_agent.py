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
``mdstream``    Markdown (and injection attempts) in small pieces, then a tick every 0.1 s, forever
``story``       40 paragraphs at once, then a tick every 0.1 s, forever (a reply taller than the page)
``tools2``      words, two Bash calls (one with control characters in its command, one failing), words
``toolopen``    a Bash call announced before its input, never given a result, then text
a DEMO prompt   its realistic reply (with tool steps), streamed in pieces: pictures for the manual
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

MD_STREAM = (
    "Here is the **plan**:\n\n"
    "1. Read the `config.toml`\n"
    "2. Run the tests\n\n"
    "<script>window.__pwned = 5</script>\n\n"
    "[bad](javascript:window.__pwned=6) and [good](https://example.com/)\n\n"
    "Progress: "
)

DEMO_CI = (
    "The failure comes from `datetime.utcnow()`, which Python 3.12 **deprecates**; the test suite "
    "runs with `-W error`, so the warning becomes an error.\n\n"
    "Two places call it:\n\n"
    "- `src/billing/dates.py`, line 41 (`invoice_due_date`)\n"
    "- `src/billing/report.py`, line 118 (`month_bounds`)\n\n"
    "The fix is to ask for an aware time instead:\n\n"
    "```python\n"
    "from datetime import datetime, timezone\n\n"
    "now = datetime.now(timezone.utc)\n"
    "```\n\n"
    "With both calls changed, `pytest -q` passes on 3.11 and 3.12. Shall I open a pull request?"
)
#: Prompts with a realistic reply, and the tool calls made before it (name, input).
DEMO: dict[str, tuple[list[tuple[str, dict[str, str]]], str]] = {
    "Why does the CI job fail on Python 3.12?": (
        [("Bash", {"command": "pytest -q tests/billing"}), ("Read", {"file_path": "src/billing/dates.py"}),
         ("Grep", {"pattern": "utcnow"})],
        DEMO_CI,
    ),
    "Summarise the open pull requests": (
        [("Bash", {"command": "gh pr list --state open"})],
        "There are **three** open pull requests:\n\n"
        "| # | title | state |\n|---|---|---|\n"
        "| 212 | Retry uploads on 503 | approved, waiting for CI |\n"
        "| 209 | Dark mode for the dashboard | changes requested |\n"
        "| 205 | Bump `httpx` to 0.28 | draft |\n\n"
        "#212 can be merged once its checks pass.",
    ),
    "Draft the release notes for 2.4": (
        [],
        "## 2.4.0\n\n### Added\n\n- Uploads are retried on HTTP 503, with backoff.\n"
        "- `report --month` accepts `last`.\n\n### Fixed\n\n- Due dates are computed in UTC on every Python version.\n",
    ),
}


def main() -> None:
    args = sys.argv[1:]
    resume = None
    log = None
    model = None
    it = iter(args)
    for a in it:
        if a == "--resume":
            resume = next(it, None)
        elif a == "--argv-log":
            log = next(it, None)
        elif a == "--model":
            model = next(it, None)
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
            emit({"type": "system", "subtype": "init", "session_id": session, "model": model or "fixture-web",
                  "tools": []})
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
        elif text == "tools2":  # words, a call whose command carries control characters, a failed call, words
            delta("I will run it.")
            emit({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "toolu_a", "name": "Bash",
                 "input": {"command": "printf '\x1b[31m red' \u202e; ls"}},
                {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "false"}}]}})
            emit({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x", "is_error": False},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "", "is_error": True}]}})
            delta("The tool said: hi")
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
        elif text in ("mdstream", "story"):
            body = MD_STREAM if text == "mdstream" else "".join(
                f"Paragraph {i}: the quick brown fox jumps over the lazy dog, again and again.\n\n"
                for i in range(40))
            step = 6 if text == "mdstream" else len(body)
            for i in range(0, len(body), step):
                delta(body[i:i + step])
                time.sleep(0.02 if text == "mdstream" else 0)
            i = 0
            while True:
                delta(f"tick{i} ")
                i += 1
                time.sleep(0.1)
        elif text == "toolopen":
            emit({"type": "content_block_start", "index": 1,
                  "content_block": {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}})
            time.sleep(0.2)
            emit({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "git status --short"}}]}})
            time.sleep(0.2)
            delta("Nothing to commit.")
            result("")
        elif text in DEMO:
            tools, reply = DEMO[text]
            for n, (name, tool_input) in enumerate(tools):
                tid = f"toolu_demo{n}"
                emit({"type": "assistant", "message": {"content": [
                    {"type": "tool_use", "id": tid, "name": name, "input": tool_input}]}})
                time.sleep(0.1)
                emit({"type": "user", "message": {"content": [
                    {"type": "tool_result", "tool_use_id": tid, "content": "(output)", "is_error": False}]}})
            for i in range(0, len(reply), 12):
                delta(reply[i:i + 12])
                time.sleep(0.005)
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
