"""``agentrt run --permission-mode ask`` and ``agentrt chat`` on a real terminal (tmux, 80x24) with Gemini CLI and
Codex (``codex-acp``).

The real peer asks for a shell tool (the fake model API calls for ``touch``);
``run`` and ``chat`` ask the user on the terminal; the answer ``a`` (always)
lets the tool run, and ``agentrt logs --approvals`` records it ``user:always``.
An answer ``n`` refuses it (the file never appears), recorded ``user``.
Ctrl-C in ``chat`` mid-reply (the fake API holding the rest) ends the turn
with one ``turn_cancelled`` and the chat goes on.  Waits are on the screen's
content and the recorded exit status; the bounds are hang guards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from agentrt.testing.real_peers import BOUND, PEER_LIST, Peer, agentrt_env, fake_api

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
POLL = 0.1  # how often the screen is read while waiting for a change on it
peers = pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)

# Runs the command in the terminal's foreground and records its exit status (tmux may not keep it);
# it survives the Ctrl-C meant for the command (exec resets the handler in the child).
RECORD = """
import os, signal, subprocess, sys
signal.signal(signal.SIGINT, lambda *_: None)
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(code))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""


class _Tmux:
    def __init__(self, tmp: Path) -> None:
        exe = shutil.which("tmux")
        if exe is None:
            if os.environ.get("CI"):
                pytest.fail("tmux is required in CI")
            pytest.skip("tmux is not installed")
        self.base = [exe, "-L", f"agentrt-test-{uuid.uuid4().hex[:8]}", "-f", "/dev/null"]

    async def run(self, *args: str, check: bool = True) -> str:
        done = await trio.run_process([*self.base, *args], capture_stdout=True, capture_stderr=True, check=check)
        return done.stdout.decode()

    async def wait_text(self, text: str) -> str:
        """The screen once ``text`` shows on it."""
        while True:  # bounded by the test's hang guard
            screen = await self.run("capture-pane", "-p", "-J", "-S", "-", "-t", "run")
            if text in screen:
                return screen
            await trio.sleep(POLL)


def _env(peer: Peer, tmp_path: Path, url: str) -> dict[str, str]:
    return agentrt_env(peer, tmp_path, url, LANG="C.UTF-8", TERM="screen")


@peers
@pytest.mark.parametrize(("key", "ran", "by"), [("a", True, "user:always"), ("n", False, "user")], ids=["always", "no"])
async def test_run_asks_on_the_terminal_and_the_answer_decides_and_is_logged(
    tmp_path: Path, peer: Peer, key: str, ran: bool, by: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    record = tmp_path / "record.py"
    record.write_text(RECORD)
    status = tmp_path / "run.status"
    with fake_api(peer, tool_command="touch tool-ran.txt") as api:
        env = _env(peer, tmp_path, api.url)
        argv = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(record), str(status),
                AGENTRT, "run", "--permission-mode", "ask", "make the file"]  # fmt: skip
        tmux = _Tmux(tmp_path)
        try:
            with trio.fail_after(BOUND * 2):  # hang guard only
                await tmux.run("-u", "new-session", "-d", "-x", "80", "-y", "24", "-c", str(work), "-s", "run", *argv)
                screen = await tmux.wait_text("[y/n/a]")
                assert "touch tool-ran.txt" in screen, screen
                assert not (work / "tool-ran.txt").exists()  # nothing runs before the answer
                await tmux.run("send-keys", "-t", "run", key, "Enter")
                while not status.exists():
                    await trio.sleep(POLL)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await tmux.run("kill-server", check=False)  # gone already once the command ended
    code = int(status.read_text())
    assert (work / "tool-ran.txt").exists() is ran
    # Refused: Gemini goes on and completes; Codex's only refusal ends its turn cancelled.
    assert code == 0 or (not ran and code in (1, 130)), code
    logs = subprocess.run([AGENTRT, "logs", "--approvals", "--json"], env=env, capture_output=True, text=True,
                          timeout=BOUND, check=True).stdout
    rows = [json.loads(line) for line in logs.splitlines() if line.strip()]
    assert [(r["decision"], r["by"]) for r in rows] == [("allow" if ran else "deny", by)], rows


@peers
async def test_chat_asks_on_the_terminal_and_a_runs_the_tool(tmp_path: Path, peer: Peer) -> None:
    work = tmp_path / "work"
    work.mkdir()
    record = tmp_path / "record.py"
    record.write_text(RECORD)
    status = tmp_path / "chat.status"
    with fake_api(peer, tool_command="touch tool-ran.txt") as api:
        env = _env(peer, tmp_path, api.url)
        argv = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(record), str(status),
                AGENTRT, "chat"]  # fmt: skip
        tmux = _Tmux(tmp_path)
        try:
            with trio.fail_after(BOUND * 2):  # hang guard only
                await tmux.run("-u", "new-session", "-d", "-x", "80", "-y", "24", "-c", str(work), "-s", "run", *argv)
                await tmux.wait_text("/help for commands")
                await tmux.run("send-keys", "-t", "run", "make the file", "Enter")
                screen = await tmux.wait_text("[y/n/a]")
                assert "touch tool-ran.txt" in screen, screen
                await tmux.run("send-keys", "-t", "run", "a", "Enter")
                await tmux.wait_text("The tool said:")
                assert (work / "tool-ran.txt").exists()
                await tmux.run("send-keys", "-t", "run", "C-d")
                while not status.exists():
                    await trio.sleep(POLL)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await tmux.run("kill-server", check=False)  # gone already once the command ended
    assert int(status.read_text()) == 0
    logs = subprocess.run([AGENTRT, "logs", "--approvals", "--json"], env=env, capture_output=True, text=True,
                          timeout=BOUND, check=True).stdout
    rows = [json.loads(line) for line in logs.splitlines() if line.strip()]
    assert [(r["decision"], r["by"]) for r in rows] == [("allow", "user:always")], rows


@peers
async def test_chat_ctrl_c_mid_reply_cancels_the_turn_and_the_chat_goes_on(tmp_path: Path, peer: Peer) -> None:
    work = tmp_path / "work"
    work.mkdir()
    record = tmp_path / "record.py"
    record.write_text(RECORD)
    status = tmp_path / "chat.status"
    with fake_api(peer, reply="A long reply the user stops.", hold=True) as api:
        env = _env(peer, tmp_path, api.url)
        argv = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, str(record), str(status),
                AGENTRT, "chat"]  # fmt: skip
        tmux = _Tmux(tmp_path)
        try:
            with trio.fail_after(BOUND):  # hang guard only
                await tmux.run("-u", "new-session", "-d", "-x", "80", "-y", "24", "-c", str(work), "-s", "run", *argv)
                await tmux.wait_text("/help for commands")
                await tmux.run("send-keys", "-t", "run", "talk", "Enter")
                await tmux.wait_text("A long")  # the first piece; the fake API holds the rest
                await tmux.run("send-keys", "-t", "run", "C-c")
                screen = await tmux.wait_text("[turn_cancelled]")
                assert screen.count("[turn_cancelled]") == 1, screen
                api.release()
                await tmux.run("send-keys", "-t", "run", "again", "Enter")
                await tmux.wait_text("A long reply the user stops.")  # the chat went on: a whole reply
                await tmux.run("send-keys", "-t", "run", "C-d")
                while not status.exists():
                    await trio.sleep(POLL)
        finally:
            api.release()
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await tmux.run("kill-server", check=False)  # gone already once the command ended
    assert int(status.read_text()) == 0
