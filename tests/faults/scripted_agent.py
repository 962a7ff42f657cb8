"""A scriptable fixture agent (awp-jsonl) for the fault-injection suite: each turn's text is its script.

Run as ``scripted_agent.py --pids PATH [--model M] [--resume ID]``. It appends its own pid to PATH at
start-up and the pid of every grandchild it spawns (the grandchild appends its own too), so the tests
can prove no process outlives the conversation. Standard library only, started with ``-S``: fast.

A turn's text is a JSON list of actions, run in order after a ``content_block_start``:

``delta``          one text delta ``"d"``
``surrogate``      a text delta ``"a\\ud83db"``: valid JSON, a lone surrogate once decoded
``garbage``        a line that is not JSON
``flood``          2,000 text deltas of 1 KiB each
``oversize``       one line longer than the host's 4 MiB cap
``terminal``       ``result`` success (the turn's terminal event)
``fail``           ``result`` with ``is_error`` (the agent's own failure)
``late``           after a terminal: a late delta and a second ``result``
``sync:K``         a ``{"type":"fixture_sync","n":K}`` line (the test waits for it)
``exit:N``         exit with code N at once
``signal:N``       send itself signal N
``grandchild``     spawn a grandchild that inherits stdout and sleeps an hour
``hang``           a text delta ``"hang"``, then sleep forever (SIGTERM ends it)
``hang-hard``      the same, ignoring SIGTERM (only SIGKILL ends it)

EOF or ``{"type":"shutdown"}`` on stdin ends it with code 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

CAP = 4 * 1024 * 1024
GRANDCHILD = (
    "import os, sys, time\n"
    "stat = open('/proc/self/stat', 'rb').read()\n"
    "start = stat[stat.rindex(b')') + 2:].split()[19].decode()\n"
    "open(sys.argv[1], 'a').write(f'{os.getpid()} {start}\\n')\n"
    "time.sleep(3600)\n"
)


def _record(path: str, pid: int) -> None:
    # "pid start-time": the start time tells a reused pid from the process we spawned.
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return  # already gone and reaped
    start = stat[stat.rindex(b")") + 2 :].split()[19].decode()
    with open(path, "a", encoding="ascii") as handle:
        handle.write(f"{pid} {start}\n")


class ScriptedAgent:
    def __init__(self, argv: list[str]) -> None:
        self.pids = ""
        self.resume: str | None = None
        it = iter(argv)
        for arg in it:
            if arg == "--pids":
                self.pids = next(it, "")
            elif arg == "--resume":
                self.resume = next(it, None)
            elif arg == "--model":
                next(it, None)
        self.session_id = ""
        self.out = sys.stdout.buffer

    def raw(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def emit(self, obj: object) -> None:
        self.raw(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def delta(self, text: str) -> None:
        self.emit({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})

    def result(self, *, error: bool) -> None:
        self.emit(
            {
                "type": "result",
                "subtype": "error_during_execution" if error else "success",
                "is_error": error,
                "session_id": self.session_id,
                "result": "scripted_failure" if error else "scripted",
            }
        )

    def act(self, action: str) -> None:
        name, _, arg = action.partition(":")
        if name == "delta":
            self.delta("d")
        elif name == "surrogate":
            # json.dumps escapes the lone surrogate: the line is valid JSON (and valid UTF-8).
            self.delta("a\ud83db")
        elif name == "garbage":
            self.raw(b"this is not json {\n")
        elif name == "flood":
            line = json.dumps(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "f" * 1024}}
            ).encode() + b"\n"
            self.raw(line * 2000)
        elif name == "oversize":
            self.raw(b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"')
            self.raw(b"x" * (CAP + 1024) + b'"}}\n')
        elif name == "terminal":
            self.result(error=False)
        elif name == "fail":
            self.result(error=True)
        elif name == "late":
            self.delta("late")
            self.result(error=False)
        elif name == "sync":
            self.emit({"type": "fixture_sync", "n": int(arg)})
        elif name == "exit":
            os._exit(int(arg))
        elif name == "signal":
            os.kill(os.getpid(), int(arg))
            time.sleep(3600)  # a blocked or ignored signal must not let the script go on
        elif name == "grandchild":
            child = subprocess.Popen(  # stdout inherited: it holds the host's pipe open
                [sys.executable, "-S", "-c", GRANDCHILD, self.pids], stdin=subprocess.DEVNULL
            )
            _record(self.pids, child.pid)
        elif name in ("hang", "hang-hard"):
            if name == "hang-hard":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self.delta("hang")
            while True:
                time.sleep(3600)
        else:
            self.delta(f"unknown action {action}")

    def turn(self, message: object) -> None:
        if not self.session_id:
            self.session_id = self.resume or f"scripted-{os.urandom(8).hex()}"
            self.emit({"type": "system", "subtype": "init", "session_id": self.session_id, "model": "scripted"})
        text = ""
        if isinstance(message, dict) and isinstance(message.get("message"), dict):
            content = message["message"].get("content")
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        try:
            script = json.loads(text)
        except ValueError:
            script = ["delta", "terminal"]
        self.emit({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        for action in script:
            self.act(str(action))

    def run(self) -> None:
        if self.pids:
            _record(self.pids, os.getpid())
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("type") == "shutdown":
                break
            self.turn(message)


def main() -> None:
    try:
        ScriptedAgent(sys.argv[1:]).run()
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(0)


if __name__ == "__main__":
    main()
