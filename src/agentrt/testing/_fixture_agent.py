"""A fixture agent CLI that follows the awp-jsonl contract, plus misbehaving modes.

Runnable three ways (it imports only the standard library, so it starts fast):

* ``python -m agentrt.testing.fixture_agent --mode normal``
* ``python -S /abs/path/to/_fixture_agent.py --mode normal`` (see :func:`fixture_agent_argv`)
* an executable script written by :func:`write_fixture_agent`, for tests of the
  launch contract, which requires a regular, non-symlink executable.

Modes (``--mode`` or ``AGENTRT_FIXTURE_MODE``):

``normal``
    after each input line: ``system/init`` (first turn only, echoing ``--model``
    and ``--resume``), ``content_block_start``, ``--deltas`` text deltas (default
    2), ``content_block_stop``, ``result`` success with usage.
``flood``
    10 MiB without a newline after the first input, then waits for EOF.
``hang``
    ignores SIGTERM, the shutdown line and EOF; never answers.
``exit-mid-turn``
    prints init and one delta, then exits with code 3.
``malformed``
    a normal turn with non-JSON lines interleaved.
``split``
    a normal turn, each line written in several small flushed writes.
``output-before-input``
    prints ``system/init`` before reading anything, then behaves normally.
``bad-session-id``
    a normal turn whose init carries an invalid session id.
``env-dump`` / ``argv-dump``
    a raw ``{"type":"fixture_env","env":{...}}`` (or ``fixture_argv``) line,
    then a normal turn whose text is that same JSON.
``stderr``
    writes ``--stderr-bytes`` (default 1 MiB) to stderr, then behaves normally.

Every mode except ``hang`` exits 0 on ``{"type":"shutdown"}`` or EOF.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time

__all__ = ["FIXTURE_MODES", "fixture_agent_path", "fixture_agent_argv", "write_fixture_agent", "main"]

FIXTURE_MODES = (
    "normal",
    "flood",
    "hang",
    "exit-mid-turn",
    "malformed",
    "split",
    "output-before-input",
    "bad-session-id",
    "env-dump",
    "argv-dump",
    "stderr",
)
"""The modes :func:`main` understands."""

FLOOD_BYTES = 10 * 1024 * 1024


def fixture_agent_path() -> str:
    """Absolute path of this module's file (runnable as a script)."""
    return os.path.abspath(__file__)


def fixture_agent_argv(mode: str = "normal", *extra: str) -> tuple[str, ...]:
    """argv that runs the fixture agent with the current interpreter (``-S``: fast start)."""
    return (sys.executable, "-S", fixture_agent_path(), "--mode", mode, *extra)


def write_fixture_agent(directory: str | os.PathLike[str], mode: str = "normal", name: str = "agent") -> str:
    """Write an executable fixture-agent script into ``directory``; return its absolute path.

    The script is a regular file (not a symlink) with a ``#!`` line naming the
    current interpreter, so it satisfies the launch contract's executable rules.
    """
    path = os.path.join(os.path.abspath(os.fspath(directory)), name)
    text = (
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.argv[1:1] = ['--mode', {mode!r}]\n"
        "import runpy\n"
        f"runpy.run_path({fixture_agent_path()!r}, run_name='__main__')\n"
    )
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, stat.S_IRWXU)
    return path


class _Agent:
    def __init__(self, argv: list[str]) -> None:
        self.mode = os.environ.get("AGENTRT_FIXTURE_MODE", "normal")
        self.model = "fixture-model"
        self.resume: str | None = None
        self.deltas = 2
        self.stderr_bytes = 1024 * 1024
        self.argv = list(argv)
        self.turns = 0
        self.session_id = ""
        it = iter(argv)
        for arg in it:
            if arg == "--mode":
                self.mode = next(it, "normal")
            elif arg == "--model":
                self.model = next(it, "")
            elif arg == "--resume":
                self.resume = next(it, None)
            elif arg == "--deltas":
                self.deltas = int(next(it, "2"))
            elif arg == "--stderr-bytes":
                self.stderr_bytes = int(next(it, "0"))
            elif arg in ("--mcp-config", "--input-format", "--output-format", "--permission-prompt-tool"):
                next(it, None)
            elif arg in ("--print", "--verbose", "--include-partial-messages"):
                pass
            else:
                self.fail(f"unsupported_argument:{arg}")
        if self.mode not in FIXTURE_MODES:
            self.fail(f"unsupported_mode:{self.mode}")
        self.out = sys.stdout.buffer

    def fail(self, code: str) -> None:
        line = {"type": "result", "subtype": "startup_error", "is_error": True, "result": code}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        sys.exit(1)

    def emit(self, obj: object) -> None:
        data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        if self.mode == "split":
            step = max(1, len(data) // 4)
            for start in range(0, len(data), step):
                self.out.write(data[start : start + step])
                self.out.flush()
                time.sleep(0.001)  # pacing, so the host sees separate reads
        else:
            self.out.write(data)
            self.out.flush()

    def raw(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def init(self) -> None:
        if self.session_id:
            return
        if self.mode == "bad-session-id":
            self.session_id = "not a valid id!"
        else:
            # os.urandom rather than uuid: importing uuid costs ~3 ms of start-up.
            self.session_id = self.resume or f"fixture-{os.urandom(16).hex()}"
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "session_id": self.session_id,
                "model": self.model,
                "cwd": os.getcwd(),
                "tools": [],
            }
        )

    def turn(self, text: str) -> None:
        self.turns += 1
        self.init()
        if self.mode == "malformed":
            self.raw(b"this is not json\n")
        self.emit({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        pieces = _split_text(text, self.deltas)
        for piece in pieces:
            delta = {"type": "text_delta", "text": piece}
            self.emit({"type": "content_block_delta", "index": 0, "delta": delta})
            if self.mode == "malformed":
                self.raw(b"{broken json\n")
            if self.mode == "exit-mid-turn":
                sys.exit(3)
        self.emit({"type": "content_block_stop", "index": 0})
        self.emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "session_id": self.session_id,
                "result": text,
                "usage": {"input_tokens": 10 * self.turns, "output_tokens": len(pieces)},
            }
        )

    def answer(self, message: object) -> None:
        if self.mode == "flood":
            chunk = b"x" * 65536
            for _ in range(FLOOD_BYTES // len(chunk)):
                self.out.write(chunk)
            self.out.flush()
            return
        if self.mode == "env-dump":
            payload: object = dict(os.environ)
            self.emit({"type": "fixture_env", "env": payload})
            self.turn(json.dumps(payload, sort_keys=True))
            return
        if self.mode == "argv-dump":
            payload = self.argv
            self.emit({"type": "fixture_argv", "argv": payload})
            self.turn(json.dumps(payload))
            return
        self.turn(f"echo: {_user_text(message)}")

    def run(self) -> None:
        if self.mode == "hang":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:  # never answers, ignores EOF too: only SIGKILL ends it
                time.sleep(3600)
        if self.mode == "stderr":
            sys.stderr.buffer.write(b"e" * (self.stderr_bytes - 4) + b"END\n")
            sys.stderr.buffer.flush()
        if self.mode == "output-before-input":
            self.init()
        for raw_line in sys.stdin.buffer:
            line = raw_line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                sys.stderr.write("fixture: invalid input json\n")
                continue
            if isinstance(message, dict) and message.get("type") == "shutdown":
                break
            self.answer(message)
        sys.exit(0)


def _user_text(message: object) -> str:
    if not isinstance(message, dict):
        return ""
    inner = message.get("message")
    content = inner.get("content") if isinstance(inner, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def _split_text(text: str, count: int) -> list[str]:
    count = max(1, count)
    size = max(1, -(-len(text) // count))
    pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    while len(pieces) < count:
        pieces.append("")
    return pieces


def main(argv: list[str] | None = None) -> None:
    """Run the fixture agent (argv defaults to ``sys.argv[1:]``)."""
    try:
        _Agent(sys.argv[1:] if argv is None else argv).run()
    except (BrokenPipeError, KeyboardInterrupt):
        # The host went away: exit at once, without flushing into a dead pipe.
        os._exit(0)


if __name__ == "__main__":
    main()
