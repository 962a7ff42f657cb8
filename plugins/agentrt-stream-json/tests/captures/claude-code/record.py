"""Record the Claude Code stream-json captures here, from the pinned CLI in ``.peers/``.

Usage: ``python plugins/agentrt-stream-json/tests/captures/claude-code/record.py [SCENARIO ...]`` (all by
default; a scenario is recorded with the others sharing its HOME, e.g. ``resume`` with ``basic_two_turns``).  Each
scenario runs the real CLI (``--output-format stream-json --input-format stream-json --print
--verbose``) against the loopback fake Anthropic API (:mod:`agentrt.testing.fake_apis`),
writes stdin lines one at a time, waits for each turn's ``result`` line, closes stdin and keeps
``X.stdout.jsonl`` (verbatim), ``X.stderr.txt`` and ``X.cmd.txt`` (the command, the stdin script,
the exit code).  Session ids (``--session-id``), scratch paths and the fake's replies are fixed, so
re-recording after a CLI upgrade shows in ``git diff`` what the CLI changed; uuids, timestamps,
timings and costs differ on every run.  Not a test: run by hand (see README.md here).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrt.testing.fake_apis import serve_fake_anthropic
from agentrt.testing.real_peers import CLAUDE_CODE, peer_path

HERE = Path(__file__).resolve().parent
CLAUDE = peer_path(CLAUDE_CODE)  # the pinned peer: .peers/node_modules in the checkout (or AGENTRT_PEERS)
SCRATCH = Path("/tmp/agentrt-capture")  # fixed, so the paths the CLI prints repeat across recordings
BASE_ARGS = ("--output-format", "stream-json", "--input-format", "stream-json", "--print", "--verbose")
TIMEOUT = 120.0  # a hang guard: the CLI starts in about a second



def session_id(name: str) -> str:
    """The fixed session id of a scenario."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"agentrt-capture:{name}"))


@dataclass(frozen=True)
class Scenario:
    name: str
    group: str  # scratch directory: scenarios of one group share HOME (resume reads basic's session)
    prompts: tuple[str, ...]
    args: tuple[str, ...] = ()
    modes: dict[str, Any] = field(default_factory=dict)  # the fake API's modes
    env: dict[str, str] = field(default_factory=dict)
    session: Callable[[], tuple[str, ...]] = lambda: ()


def _fresh(name: str) -> Callable[[], tuple[str, ...]]:
    return lambda: ("--session-id", session_id(name))


ECHO: dict[str, Any] = {"echo": True, "chunk": 12}
TOOL: dict[str, Any] = {"echo": True, "chunk": 10, "tool_command": "echo hi", "preamble": "I will run a command."}
SCENARIOS = [
    Scenario("basic_two_turns", "main", ("hello", "second turn"), modes=ECHO, session=_fresh("basic_two_turns")),
    Scenario(
        "partial_messages_two_turns",
        "partial",
        ("hello", "second turn"),
        ("--include-partial-messages",),
        ECHO,
        session=_fresh("partial_messages_two_turns"),
    ),
    Scenario(
        "resume",
        "main",
        ("third turn after resume",),
        modes=ECHO,
        session=lambda: ("--resume", session_id("basic_two_turns")),
    ),
    Scenario(
        "tool_use_allowed",
        "tool",
        ("USE_TOOL please",),
        ("--allowedTools", "Bash(echo:*)"),
        TOOL,
        session=_fresh("tool_use_allowed"),
    ),
    Scenario(
        "tool_use_allowed_partial",
        "tool",
        ("USE_TOOL please",),
        ("--allowedTools", "Bash(echo:*)", "--include-partial-messages"),
        TOOL,
        session=_fresh("tool_use_allowed_partial"),
    ),
    Scenario(
        "http_500",
        "err",
        ("FAIL_500 now",),
        ("--include-partial-messages",),
        {"fail_status": 500},
        {"CLAUDE_CODE_MAX_RETRIES": "2"},
        session=_fresh("http_500"),
    ),
]


def _user_line(text: str) -> bytes:
    message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def record(sc: Scenario, version: str) -> None:
    """Run one scenario and write its three files."""
    home, work = SCRATCH / sc.group / "home", SCRATCH / sc.group / "work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    argv = [str(CLAUDE), *BASE_ARGS, "--model", "claude-test", *sc.args, *sc.session()]
    with serve_fake_anthropic(**sc.modes) as api:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "ANTHROPIC_BASE_URL": api.url,
            "HOME": str(home),
            "ANTHROPIC_API_KEY": "sk-test",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            **sc.env,
        }
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stderr: list[bytes] = []
        drain = threading.Thread(target=lambda: stderr.append(proc.stderr.read()))  # type: ignore[union-attr]
        drain.start()
        guard = threading.Timer(TIMEOUT, proc.kill)
        guard.start()
        out: list[bytes] = []
        try:
            results = 0
            for prompt in sc.prompts:
                proc.stdin.write(_user_line(prompt))
                proc.stdin.flush()
                while True:
                    line = proc.stdout.readline()
                    if not line:
                        raise SystemExit(f"{sc.name}: the CLI closed stdout before result {results + 1}")
                    out.append(line)
                    if json.loads(line).get("type") == "result":
                        results += 1
                        break
            proc.stdin.close()
            out.append(proc.stdout.read())
            code = proc.wait()
        finally:
            guard.cancel()
            if proc.poll() is None:  # a scenario that went wrong: reap the CLI before leaving
                proc.kill()
                proc.wait()
            drain.join()
        wall = (time.monotonic() - started) * 1000
    (HERE / f"{sc.name}.stdout.jsonl").write_bytes(b"".join(out))
    (HERE / f"{sc.name}.stderr.txt").write_bytes(b"".join(stderr))
    shown = ["<CLAUDE>", *argv[1:]]
    env_shown = " ".join(f"{k}={'http://127.0.0.1:<PORT>' if k == 'ANTHROPIC_BASE_URL' else v}" for k, v in env.items())
    script = "".join(f"SEND {_user_line(p).decode()}WAIT_RESULTS {i}\n" for i, p in enumerate(sc.prompts, 1))
    (HERE / f"{sc.name}.cmd.txt").write_text(
        f"# scenario: {sc.name}\n"
        f"# exit code: {code}   wall time: {wall:.0f} ms   (hang guard {TIMEOUT:.0f} s)\n"
        f"# <CLAUDE> = .peers/node_modules/{CLAUDE_CODE} (Claude Code {version}), <PORT> = the fake API's port\n"
        f"# fake API modes: {json.dumps(sc.modes, sort_keys=True)}\n"
        f"cd {work} && <stdin below> | env {env_shown} "
        f"{shlex.join(shown)}\n"
        "# stdin script (SEND = line written to stdin; WAIT_RESULTS n = wait for n result lines on stdout;"
        " then stdin closed):\n"
        f"{script}"
    )
    lines = b"".join(out).count(b"\n")
    print(f"{sc.name}: exit {code}, {lines} stdout lines, {wall:.0f} ms", file=sys.stderr)


def main(names: list[str]) -> int:
    if not CLAUDE.is_file():
        raise SystemExit(f"{CLAUDE} is missing: run `npm ci` in .peers/")
    unknown = set(names) - {sc.name for sc in SCENARIOS}
    if unknown:
        raise SystemExit(f"unknown scenarios: {sorted(unknown)}")
    # Scenarios of a group share a HOME (resume continues basic_two_turns' session): a group is
    # recorded whole, from an empty scratch directory, or resume would see earlier resumes.
    groups = {sc.group for sc in SCENARIOS if not names or sc.name in names}
    chosen = [sc for sc in SCENARIOS if sc.group in groups]
    for group in groups:
        shutil.rmtree(SCRATCH / group, ignore_errors=True)
    version = subprocess.run([str(CLAUDE), "--version"], capture_output=True, check=True, text=True).stdout.split()[0]
    for sc in chosen:
        record(sc, version)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main(sys.argv[1:]))
