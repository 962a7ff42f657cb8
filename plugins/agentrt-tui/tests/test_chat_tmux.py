"""``agentrt chat`` in a real terminal: tmux drives it, capture-pane reads the screen."""

import json
import os
import re
import shutil
import signal
import sqlite3
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from agentrt_stream_json import fixture_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
SLOW_AGENT = Path(__file__).with_name("slow_agent.py")
RECORD_EXIT = Path(__file__).with_name("record_exit.py")
POLL = 0.05


def _tmux_path() -> str:
    path = shutil.which("tmux")
    if path is None:
        # CI installs it (.ci/run) and must run these tests; elsewhere say what is missing.
        message = "tmux is required for the chat tests (apt-get install -y tmux); it was not found on PATH"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


class Tmux:
    """One private tmux server (its own socket), torn down by the test."""

    def __init__(self, tmp: Path) -> None:
        self.exe = _tmux_path()
        self.socket = f"agentrt-test-{uuid.uuid4().hex[:8]}"
        self.conf = tmp / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n")

    async def run(self, *args: str) -> str:
        done = await trio.run_process([self.exe, "-L", self.socket, "-f", str(self.conf), *args],
                                      capture_stdout=True, capture_stderr=True)
        return done.stdout.decode()

    async def start(self, name: str, argv: list[str]) -> None:
        # Several arguments: tmux executes them directly, no shell involved.
        await self.run("-u", "new-session", "-d", "-x", "120", "-y", "40", "-s", name, *argv)

    async def screen(self, name: str) -> str:
        return await self.run("capture-pane", "-p", "-J", "-S", "-", "-t", name)

    async def keys(self, name: str, *keys: str) -> None:
        await self.run("send-keys", "-t", name, *keys)

    async def wait_for(self, name: str, test: Callable[[str], bool], what: str, timeout: float = 20) -> str:
        screen = ""
        with trio.move_on_after(timeout):
            while True:
                screen = await self.screen(name)
                if test(screen):
                    return screen
                await trio.sleep(POLL)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{screen}")

    async def wait_text(self, name: str, text: str, timeout: float = 20) -> str:
        return await self.wait_for(name, lambda s: text in s, repr(text), timeout)

    async def pane(self, name: str, fmt: str) -> str:
        return (await self.run("display-message", "-p", "-t", name, fmt)).strip()

    async def wait_exit(self, status_file: Path, timeout: float = 20) -> int:
        """The exit status of the command, as record_exit.py wrote it."""
        with trio.move_on_after(timeout):
            while not await trio.Path(status_file).exists():
                await trio.sleep(POLL)
            return int(await trio.Path(status_file).read_text())
        raise AssertionError(f"the chat did not exit within {timeout} s")

    async def kill(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await self.run("kill-server")


def _agent_script(tmp: Path) -> str:
    path = tmp / "slow-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(SLOW_AGENT)!r}, run_name='__main__')\n")
    path.chmod(0o755)
    return str(path)


def _argv(tmp: Path, status: str, agent: str, *args: str) -> list[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "TERM": "screen",
        "AWP_AGENT_CLI_EXECUTABLE": agent,
        "AWP_AGENT_CLI_PROTOCOL": "awp-jsonl",
        "AWP_AGENT_DEFAULT_MODEL": "slow-model",
        "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/chat.db",
        "AGENTRT_LOAD_PLUGINS": "awp-jsonl,sqlite,tui",
        "AWP_AGENT_CLI_ENV_JSON": json.dumps({"SLOW_AGENT_PID_FILE": str(tmp / "agent.pids")}),
    }
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(RECORD_EXIT),
            str(tmp / status), AGENTRT, "chat", *args]


async def test_chat_streams_cancels_with_ctrl_c_and_resumes_its_thread(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    agent = _agent_script(tmp_path)
    try:
        await tmux.start("one", _argv(tmp_path, "one.status", agent, "--thread", "work"))
        await tmux.wait_text("one", "/help for commands")

        await tmux.keys("one", "hello there", "Enter")
        screen = await tmux.wait_text("one", "7 in · 3 out")
        assert "reply to: hello there" in screen
        assert "**hello there**" not in screen  # rendered as Markdown once complete
        assert "\x1b" not in screen

        # Ctrl-C mid-reply cancels the turn, not the chat.
        await tmux.keys("one", "slow please", "Enter")
        await tmux.wait_text("one", "tick 3 ")
        await tmux.keys("one", "C-c")
        await tmux.wait_text("one", "the turn was cancelled [turn_cancelled]")
        assert await tmux.pane("one", "#{pane_dead}") == "0"

        # The next prompt works: a fresh process, resumed with the native session id.
        await tmux.wait_for("one", lambda s: s.rstrip().endswith("›"), "the prompt after the cancel")
        await tmux.keys("one", "after", "Enter")
        screen = await tmux.wait_for("one", lambda s: re.search(r"reply to: after \(resumed from slow-", s)
                                     is not None, "the reply after the cancel")
        session = re.search(r"resumed from (slow-[0-9a-f]+)", screen).group(1)

        # Ctrl-C at the prompt clears the line and keeps the chat.
        await tmux.wait_for("one", lambda s: s.rstrip().endswith("›"), "the prompt after the reply")
        await tmux.keys("one", "half-typed junk")
        await tmux.wait_text("one", "› half-typed junk")
        await tmux.keys("one", "C-c")
        await tmux.wait_for("one", lambda s: s.rstrip().endswith("›"), "a fresh prompt")
        assert await tmux.pane("one", "#{pane_dead}") == "0"

        await tmux.keys("one", "/usage", "Enter")
        await tmux.wait_text("one", "turns: 3")
        # Keys sent before the prompt is back (and the terminal in raw mode again)
        # can be eaten by the line discipline: wait for the prompt first.
        await tmux.wait_for("one", lambda s: s.rstrip().endswith("›"), "the prompt after /usage")
        # Input history: Up recalls the previous line.
        await tmux.keys("one", "Up")
        await tmux.wait_for("one", lambda s: s.rstrip().endswith("› /usage"), "the recalled /usage")
        await tmux.keys("one", "C-u", "/thread", "Enter")
        await tmux.wait_text("one", f"session: {session}")
        await tmux.wait_for("one", lambda s: s.rstrip().endswith("›"), "the prompt after /thread")

        # Ctrl-D ends the chat cleanly.
        await tmux.keys("one", "C-d")
        assert await tmux.wait_exit(tmp_path / "one.status") == 0

        db = sqlite3.connect(tmp_path / "chat.db")
        assert db.execute("SELECT session_id FROM threads WHERE name = 'work'").fetchone() == (session,)
        outcomes = db.execute("SELECT outcome, code FROM turns ORDER BY id").fetchall()
        db.close()
        assert outcomes == [("completed", None), ("failed", "turn_cancelled"), ("completed", None)]

        # A new chat on the same thread resumes the stored native session.
        await tmux.start("two", _argv(tmp_path, "two.status", agent, "--thread", "work"))
        await tmux.wait_text("two", f"resuming {session}")
        await tmux.wait_for("two", lambda s: s.rstrip().endswith("›"), "the prompt of the resumed chat")
        await tmux.keys("two", "again", "Enter")
        await tmux.wait_text("two", f"reply to: again (resumed from {session})")
        await tmux.wait_for("two", lambda s: s.rstrip().endswith("›"), "the prompt after the reply")
        await tmux.keys("two", "/exit", "Enter")
        assert await tmux.wait_exit(tmp_path / "two.status") == 0

        # Every agent process the chats started (three: the first, the one after the
        # cancel, the second chat's) is gone.
        pids = [int(p) for p in (tmp_path / "agent.pids").read_text().split()]
        assert len(pids) == 3
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        await tmux.kill()


async def test_sigterm_at_the_terminal_prompt_exits_143(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    agent = _agent_script(tmp_path)
    try:
        await tmux.start("t", _argv(tmp_path, "t.status", agent))
        await tmux.wait_for("t", lambda s: s.rstrip().endswith("›"), "the prompt")
        # The pane runs record_exit.py, whose one child is agentrt chat.
        wrapper = int(await tmux.pane("t", "#{pane_pid}"))
        children = Path(f"/proc/{wrapper}/task/{wrapper}/children").read_text().split()
        (chat_pid,) = [int(c) for c in children]
        os.kill(chat_pid, signal.SIGTERM)
        assert await tmux.wait_exit(tmp_path / "t.status") == 143
        # The prompt was ended, not abandoned: the terminal is out of raw mode.
        assert (tmp_path / "t.status.tty").read_text() == "cooked"
        await tmux.wait_text("t", "interrupted: SIGTERM received; the agent was stopped")
        # The bounded stop ran: the agent it started is gone.
        for pid in [int(p) for p in (tmp_path / "agent.pids").read_text().split()]:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        await tmux.kill()


STREAM_JSON_FIXTURE = Path(fixture_agent.__file__)


def _approval_argv(tmp: Path, status: str, *args: str) -> list[str]:
    """``agentrt chat -a claude`` with the stream-json fixture agent, which asks to run ``git status --short``."""
    exe = tmp / "fake-claude"
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\n"
                   f"runpy.run_path({str(STREAM_JSON_FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(0o700)
    (tmp / "config.toml").write_text(
        f'[agents.claude]\nexecutable = "{exe}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
        'env = { STREAM_JSON_FIXTURE_MODE = "permission", STREAM_JSON_FIXTURE_COMMAND = "git status --short" }\n')
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8", "TERM": "screen",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp}/chat.db",
    }
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(RECORD_EXIT),
            str(tmp / status), AGENTRT, "chat", "-a", "claude", *args]


def _replies(screen: str) -> int:
    # The agent's replies, each a line of its own (the tool's result line above each also names it).
    return sum(1 for line in screen.splitlines() if line.startswith("allowed:git status --short"))


async def test_chat_asks_before_a_tool_runs_and_remembers_always(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    question = "Allow Bash? [y/n/a]"
    try:
        await tmux.start("ask", _approval_argv(tmp_path, "ask.status"))
        await tmux.wait_text("ask", "/help for commands")
        await tmux.keys("ask", "first", "Enter")
        # The question, the whole input behind the gutter, and (last) what "always" would cover.
        screen = await tmux.wait_text("ask", "a always: Bash with exactly this command, for the rest of this chat")
        assert question in screen and "  │ git status --short" in screen
        await tmux.keys("ask", "y", "Enter")
        await tmux.wait_text("ask", "allowed:git status --short")

        await tmux.wait_for("ask", lambda s: s.rstrip().endswith("›"), "the prompt after the first reply")
        await tmux.keys("ask", "second", "Enter")
        await tmux.wait_for("ask", lambda s: s.count(question) == 2, "the second question")
        await tmux.keys("ask", "n", "Enter")
        await tmux.wait_text("ask", "denied:agentrt: Bash(git status --short) denied by the user")

        await tmux.wait_for("ask", lambda s: s.rstrip().endswith("›"), "the prompt after the denial")
        await tmux.keys("ask", "third", "Enter")
        await tmux.wait_for("ask", lambda s: s.count(question) == 3, "the third question")
        await tmux.keys("ask", "a", "Enter")
        await tmux.wait_for("ask", lambda s: _replies(s) == 2, "the third reply")

        # "always": the same tool and command is not asked about again in this chat.
        await tmux.wait_for("ask", lambda s: s.rstrip().endswith("›"), "the prompt after always")
        await tmux.keys("ask", "fourth", "Enter")
        screen = await tmux.wait_for("ask", lambda s: _replies(s) == 3, "the fourth reply")
        assert screen.count(question) == 3
        await tmux.wait_for("ask", lambda s: s.rstrip().endswith("›"), "the prompt after the fourth reply")
        await tmux.keys("ask", "C-d")
        assert await tmux.wait_exit(tmp_path / "ask.status") == 0
    finally:
        await tmux.kill()
    db = sqlite3.connect(tmp_path / "chat.db")
    rows = db.execute("SELECT a.tool, a.summary, a.decision, a.by, c.agent FROM approvals a"
                      " JOIN conversations c ON a.conversation_id = c.id ORDER BY a.id").fetchall()
    db.close()
    assert rows == [
        ("Bash", "git status --short", "allow", "user", "claude"),
        ("Bash", "git status --short", "deny", "user", "claude"),
        ("Bash", "git status --short", "allow", "user:always", "claude"),
        ("Bash", "git status --short", "allow", "always", "claude"),
    ]


async def test_an_unanswered_question_times_out_to_deny_with_a_note(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    try:
        await tmux.start("late", _approval_argv(tmp_path, "late.status", "--ask-timeout", "1"))
        await tmux.wait_text("late", "/help for commands")
        await tmux.keys("late", "go", "Enter")
        screen = await tmux.wait_text("late", "denied:agentrt: Bash(git status --short) denied: no answer within 1s")
        assert "· Bash(git status --short) denied: no answer within 1s" in screen
        # The chat goes on: the next prompt reads what is typed, the old question does not.
        await tmux.wait_for("late", lambda s: s.rstrip().endswith("›"), "the prompt after the timeout")
        await tmux.keys("late", "/exit", "Enter")
        assert await tmux.wait_exit(tmp_path / "late.status") == 0
    finally:
        await tmux.kill()


async def test_run_on_a_terminal_asks_too(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    argv = _approval_argv(tmp_path, "run.status")
    argv[argv.index("chat"):] = ["run", "-a", "claude", "--permission-mode", "ask", "go"]
    try:
        await tmux.start("run", argv)
        await tmux.wait_text("run", "Allow Bash? [y/n/a]")
        await tmux.wait_text("run", "  │ git status --short")
        await tmux.keys("run", "y", "Enter")
        await tmux.wait_text("run", "allowed:git status --short")
        assert await tmux.wait_exit(tmp_path / "run.status") == 0
    finally:
        await tmux.kill()
