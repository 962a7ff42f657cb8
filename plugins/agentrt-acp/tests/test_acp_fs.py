"""ACP client file access never blocks: a FIFO an agent makes in its cwd is refused, at once.

Real parts: the fixture ACP agent (Python SDK) makes the FIFO itself with
``os.mkfifo`` and asks the host to read or write it; ``agentrt run`` is a real
subprocess.  Before the fix the host's ``open()`` blocked on the FIFO past
``--timeout``, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import ControlRequest, TextDelta, TurnCompleted
from agentrt.permissions import deny_all
from agentrt_acp import _fs
from agentrt_acp.codec import AcpDialect, AcpOptions

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "acp_agent.py"
BOUND = 60  # hang guards only


def _fixture(tmp_path: Path) -> str:
    path = tmp_path / "acp-fixture-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    path.chmod(stat.S_IRWXU)
    return str(path)


def _run(cwd: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
    env.update({k: v for k, v in os.environ.items() if k.startswith("XDG_")})  # the suite's scratch dirs
    env.update(
        AWP_AGENT_CLI_EXECUTABLE=_fixture(cwd.parent),
        AWP_AGENT_CLI_PROTOCOL="acp",
        AGENTRT_ACP_FS="write",
    )
    return subprocess.run(
        [AGENTRT, "run", "--timeout", "30", prompt],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=2 * BOUND,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("mode", ["read", "write", "write-held"])
def test_run_refuses_a_fifo_the_agent_made(tmp_path: Path, mode: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    fifo = work / "pipe"
    proc = _run(work, f"fifo {mode} {fifo}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "error -32602 not_regular_file"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # the agent did make it


def test_fs_refuses_every_kind_but_a_regular_file(tmp_path: Path) -> None:
    import socket

    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "plain.txt").write_bytes(b"a\r\nb\xff\n")
    try:
        for name in ("dir", "fifo", "sock"):
            for op, params in ((_fs.read_text_file, {}), (_fs.write_text_file, {"content": "x"})):
                with pytest.raises(_fs.FsError) as info:
                    op(str(tmp_path), {"path": str(tmp_path / name), **params}, 100)
                assert (info.value.rpc_code, info.value.code) == (-32602, "not_regular_file"), (name, op)
                assert "only regular files" in info.value.message
    finally:
        sock.close()
    # A regular file is read whole and exactly (no newline translation; bad bytes replaced).
    got = _fs.read_text_file(str(tmp_path), {"path": str(tmp_path / "plain.txt")}, 100)
    assert got == {"content": "a\r\nb\ufffd\n"}
    with pytest.raises(_fs.FsError) as info:
        _fs.read_text_file(str(tmp_path), {"path": str(tmp_path / "plain.txt")}, 5)
    assert info.value.code == "file_too_large"
    # A write replaces the whole content of an existing file.
    assert _fs.write_text_file(str(tmp_path), {"path": str(tmp_path / "plain.txt"), "content": "z"}, 100) == {}
    assert (tmp_path / "plain.txt").read_bytes() == b"z"


async def test_a_blocked_fs_request_is_abandoned_when_the_conversation_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even an open that does block (the old flags, on the agent's FIFO) does not hold the host."""
    real = _fs._open_regular
    entered, done = threading.Event(), threading.Event()

    def blocking_open(path: str, flags: int, verb: str) -> int:
        entered.set()
        try:
            return real(path, flags, verb)
        finally:
            done.set()

    monkeypatch.setattr(_fs, "_open_regular", blocking_open)
    monkeypatch.setattr(_fs, "_OPEN_FLAGS", os.O_NOFOLLOW | os.O_CLOEXEC)  # no O_NONBLOCK: open() blocks
    work = tmp_path / "work"
    work.mkdir()
    fifo = work / "pipe"
    launch = LaunchSpec(executable=_fixture(tmp_path), protocol="acp")
    seen: list[Any] = []
    with trio.fail_after(BOUND):
        async with open_conversation(
            launch,
            dialect=AcpDialect(AcpOptions(fs_read=True)),
            permission_policy=deny_all,
            parent_env={k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
            cwd=str(work),
        ) as conv:
            stream = conv.send(f"fifo read {fifo}")
            async for ev in stream:
                seen.append(ev)
                if isinstance(ev, ControlRequest):
                    break
            await trio.to_thread.run_sync(entered.wait, abandon_on_cancel=True)
        # Closed with the host's thread still in open(): the request was abandoned.
        assert not done.is_set()
    assert any(isinstance(ev, ControlRequest) for ev in seen)
    # Let the abandoned thread finish: a writer on the FIFO ends its open(), fstat refuses the FIFO.
    fd = os.open(fifo, os.O_RDWR)
    try:
        assert await trio.to_thread.run_sync(done.wait, BOUND)
    finally:
        os.close(fd)


async def test_the_turn_goes_on_after_a_refused_fifo(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launch = LaunchSpec(executable=_fixture(tmp_path), protocol="acp")
    with trio.fail_after(BOUND):
        async with open_conversation(
            launch,
            dialect=AcpDialect(AcpOptions(fs_read=True, fs_write=True)),
            permission_policy=deny_all,
            parent_env={k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
            cwd=str(work),
        ) as conv:
            texts = []
            for prompt in (f"fifo write {work / 'p1'}", f"write {work / 'ok.txt'} fine", f"read {work / 'ok.txt'}"):
                stream = conv.send(prompt)
                text = "".join([ev.text async for ev in stream if isinstance(ev, TextDelta)])
                assert isinstance(stream.terminal, TurnCompleted)
                texts.append(text)
    assert texts == ["error -32602 not_regular_file", "written", "content=fine"]


def test_a_directory_swapped_for_a_symlink_after_the_check_does_not_lead_out(tmp_path: Path) -> None:
    """The path is walked again from the root without following symlinks: the state after a swap is refused."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (work / "sub").symlink_to(outside)  # what `sub` became after the check saw a real directory
    where = (os.path.realpath(work), ["sub", "secret.txt"])
    for flags in (os.O_RDONLY, os.O_WRONLY | os.O_CREAT):
        with pytest.raises(_fs.FsError) as info:
            _fs._open_regular(where, flags, "read")
        assert info.value.code == "path_outside_cwd"
    assert (outside / "secret.txt").read_text() == "secret"
    # A real directory on the way is walked as before; the root itself is not a file.
    (work / "real").mkdir()
    (work / "real" / "f.txt").write_text("in")
    got = _fs.read_text_file(str(work), {"path": str(work / "real" / "f.txt")}, 100)
    assert got == {"content": "in"}
    with pytest.raises(_fs.FsError) as info:
        _fs.read_text_file(str(work), {"path": str(work)}, 100)
    assert info.value.code == "not_regular_file"
