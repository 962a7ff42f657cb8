"""A fixture agent CLI that replays a recorded tape (a real CLI's stdout capture).

Per input line it writes the tape's next lines up to and including the next
``result`` line, so a capture of an N-turn session answers N turns.  It
imports only the standard library (fast start) and follows the contract's
ordering: nothing is written before the first input.

* ``python -S /abs/path/_tape_agent.py --tape capture.jsonl [--argv-log FILE]``
* :func:`write_tape_agent` writes an executable script (the launch contract
  needs a regular, non-symlink executable).

With ``--resume ID`` the tape's session ids are rewritten to ``ID`` (a tape
recorded without resume then behaves like a resumed session), which lets
resume round trips be tested against real captures.
"""

from __future__ import annotations

import json
import os
import stat
import sys

__all__ = ["tape_agent_path", "write_tape_agent", "main"]


def tape_agent_path() -> str:
    """Absolute path of this module's file (runnable as a script)."""
    return os.path.abspath(__file__)


def write_tape_agent(directory: str | os.PathLike[str], tape: str | os.PathLike[str], name: str = "tape-agent") -> str:
    """Write an executable tape-agent script replaying ``tape``; return its absolute path."""
    path = os.path.join(os.path.abspath(os.fspath(directory)), name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            f"#!{sys.executable} -S\n"
            "import sys, runpy\n"
            f"sys.argv[1:1] = ['--tape', {os.path.abspath(os.fspath(tape))!r}]\n"
            f"runpy.run_path({tape_agent_path()!r}, run_name='__main__')\n"
        )
    os.chmod(path, stat.S_IRWXU)
    return path


def _turns(lines: list[str]) -> list[list[str]]:
    turns: list[list[str]] = [[]]
    for line in lines:
        turns[-1].append(line)
        try:
            kind = json.loads(line).get("type")
        except (ValueError, AttributeError):
            kind = None
        if kind == "result":
            turns.append([])
    return [t for t in turns if t]


def main(argv: list[str] | None = None) -> int:
    """Replay the tape, one recorded turn per input line; exit 0 at EOF or shutdown."""
    args = list(sys.argv[1:] if argv is None else argv)
    tape = resume = argv_log = None
    it = iter(args)
    for arg in it:
        if arg == "--tape":
            tape = next(it, None)
        elif arg == "--resume":
            resume = next(it, None)
        elif arg == "--argv-log":
            argv_log = next(it, None)
        elif arg in ("--model", "--mcp-config", "--output-format", "--input-format"):
            next(it, None)
    if tape is None:
        sys.stderr.write("tape agent: --tape FILE is required\n")
        return 2
    if argv_log:
        with open(argv_log, "a", encoding="utf-8") as log:
            log.write(json.dumps(args) + "\n")
    with open(tape, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip()]
    if resume:
        original = None
        for line in lines:
            obj = json.loads(line)
            if obj.get("type") == "system" and obj.get("subtype") == "init":
                original = obj.get("session_id")
                break
        if original:
            lines = [line.replace(original, resume) for line in lines]
    turns = _turns(lines)
    out = sys.stdout
    for raw in sys.stdin:
        raw = raw.strip()
        if not raw:
            continue
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if msg.get("type") == "shutdown":
            break
        if msg.get("type") != "user":
            continue  # e.g. control responses: the tape does not depend on them
        if not turns:
            break
        for line in turns.pop(0):
            out.write(line + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
