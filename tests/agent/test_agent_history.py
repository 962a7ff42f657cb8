"""Native session history: file format, private permissions, validation codes, atomicity."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio

from agentrt import AgentrtError
from agentrt.agent import (
    MAX_MESSAGES,
    SessionState,
    _history,
    append_session,
    load_session,
    prepare_state_dir,
    save_session,
)


def code_of(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(AgentrtError) as info:
        fn(*args)
    return info.value.code


def test_round_trip_and_file_shape(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "a" / "sessions"))
    assert os.stat(state).st_mode & 0o777 == 0o700
    fresh = load_session(state, None)
    assert len(fresh.session_id) == 36 and fresh.messages == []
    messages = [{"role": "user", "content": "hé"}, {"role": "assistant", "content": "yo"}]
    save_session(state, SessionState(session_id="s-1", messages=messages))
    path = Path(state) / "s-1.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes() == (
        '{"version":1,"session_id":"s-1","messages":[{"role":"user","content":"hé"},'
        '{"role":"assistant","content":"yo"}]}'
    ).encode()
    assert load_session(state, "s-1").messages == messages
    # No temp left behind; the session's lock file stays (removing it would race with a waiter).
    assert sorted(p.name for p in Path(state).iterdir()) == [".s-1.lock", "s-1.json"]


def test_missing_file_is_empty_history(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    assert load_session(state, "new.id:1") == SessionState(session_id="new.id:1", messages=[])


def test_keeps_last_100_messages(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": str(i)} for i in range(150)]
    save_session(state, SessionState(session_id="s", messages=messages))
    loaded = load_session(state, "s").messages
    assert len(loaded) == MAX_MESSAGES and loaded[0]["content"] == "50"


def test_oversize(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    big = [{"role": "user", "content": "x" * (4 * 1024 * 1024)}]
    assert code_of(save_session, state, SessionState(session_id="s", messages=big)) == "session_state_oversize"
    assert not (Path(state) / "s.json").exists()
    path = Path(state) / "t.json"
    path.write_bytes(b" " * (4 * 1024 * 1024 + 1))
    path.chmod(0o600)
    assert code_of(load_session, state, "t") == "session_state_oversize"


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"{oops", "invalid_session_state"),
        (b"\xff\xfe", "invalid_session_state"),
        (b'{"version":2,"session_id":"s","messages":[]}', "invalid_session_state"),
        (b'{"version":true,"session_id":"s","messages":[]}', "invalid_session_state"),
        (b'{"version":1,"session_id":"other","messages":[]}', "invalid_session_state"),
        (b"[]", "invalid_session_state"),
        (b'{"version":1,"session_id":"s","messages":{}}', "invalid_session_messages"),
        (b'{"version":1,"session_id":"s","messages":[1]}', "invalid_session_message"),
        (b'{"version":1,"session_id":"s","messages":[{"role":"tool","content":"x"}]}', "invalid_session_role"),
        (b'{"version":1,"session_id":"s","messages":[{"role":"user","content":1}]}', "invalid_session_content"),
    ],
)
def test_invalid_state(tmp: Path, content: bytes, code: str) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    path = Path(state) / "s.json"
    path.write_bytes(content)
    path.chmod(0o600)
    assert code_of(load_session, state, "s") == code


def test_too_many_stored_messages(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    body = {"version": 1, "session_id": "s", "messages": [{"role": "user", "content": "x"}] * 101}
    path = Path(state) / "s.json"
    path.write_bytes(orjson.dumps(body))
    path.chmod(0o600)
    assert code_of(load_session, state, "s") == "invalid_session_messages"


def test_invalid_session_ids(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    for bad in ("../x", "a/b", "", "x" * 257, "sp ace", "ü"):
        if bad:
            assert code_of(load_session, state, bad) == "invalid_session_id"


def test_unsafe_directories(tmp: Path) -> None:
    real = tmp / "real"
    real.mkdir(mode=0o700)
    link = tmp / "link"
    link.symlink_to(real)
    assert code_of(prepare_state_dir, str(link)) == "unsafe_session_state_directory"
    # A symlinked component higher up is resolved away only if it is the configured
    # leaf's ancestor; the canonical path is what gets checked and used.
    assert prepare_state_dir(str(link / "inner")) == str(real / "inner")
    loose = tmp / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    assert code_of(prepare_state_dir, str(loose)) == "unsafe_session_state_permissions"
    a_file = tmp / "file"
    a_file.write_text("x")
    assert code_of(prepare_state_dir, str(a_file)) == "invalid_state_directory"
    assert code_of(prepare_state_dir, "relative") == "invalid_state_directory"


def test_unsafe_targets(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    elsewhere = tmp / "elsewhere.json"
    elsewhere.write_bytes(b'{"version":1,"session_id":"s","messages":[]}')
    elsewhere.chmod(0o600)
    (Path(state) / "s.json").symlink_to(elsewhere)
    assert code_of(load_session, state, "s") == "unsafe_session_state_target"
    assert code_of(save_session, state, SessionState(session_id="s")) == "unsafe_session_state_target"
    assert elsewhere.read_bytes().startswith(b'{"version":1')  # untouched
    (Path(state) / "d.json").mkdir()
    assert code_of(load_session, state, "d") == "unsafe_session_state_target"
    loose = Path(state) / "l.json"
    loose.write_bytes(b'{"version":1,"session_id":"l","messages":[]}')
    loose.chmod(0o644)
    assert code_of(load_session, state, "l") == "unsafe_session_state_permissions"


def test_stale_temp_files_are_swept_on_resume(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    save_session(state, SessionState(session_id="s", messages=[{"role": "user", "content": "x"}]))
    stale = Path(state) / f".s.{'ab' * 16}.tmp"
    stale.write_bytes(b"partial")
    other = Path(state) / f".other.{'cd' * 16}.tmp"
    other.write_bytes(b"not ours to sweep")
    assert load_session(state, "s").messages == [{"role": "user", "content": "x"}]
    assert not stale.exists() and other.exists()


WRITER = r"""
import sys
from agentrt.agent import SessionState, load_session, prepare_state_dir, save_session
state = prepare_state_dir(sys.argv[1])
session = load_session(state, "kill")
n = len(session.messages)
sys.stdout.write("ready\n"); sys.stdout.flush()
while True:
    # Each generation differs in size, so a torn write could not pass for a whole one.
    n += 1
    messages = [{"role": "user", "content": f"{i}:" + "x" * (i * 37 % 5000)} for i in range(n % 90 + 1)]
    save_session(state, SessionState(session_id="kill", messages=messages))
"""


def _check_generation(path: Path) -> None:
    data = orjson.loads(path.read_bytes())  # always complete JSON
    assert data["version"] == 1 and data["session_id"] == "kill"
    messages = data["messages"]
    assert 1 <= len(messages) <= 90
    for i, m in enumerate(messages):
        assert m == {"role": "user", "content": f"{i}:" + "x" * (i * 37 % 5000)}


async def test_sigkill_during_writes_never_tears_the_file(tmp: Path) -> None:
    state = tmp / "state"
    rng = random.Random(4711)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(20):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", WRITER, str(state)], stdout=subprocess.PIPE, env=env
        )
        try:
            assert proc.stdout is not None
            with trio.fail_after(20):
                got = b""
                while not got.endswith(b"ready\n"):
                    chunk = await proc.stdout.receive_some(64)
                    assert chunk, "writer died before it was ready"
                    got += chunk
            # Killed at a random instant while it rewrites the file in a loop.
            await trio.sleep(rng.uniform(0, 0.05))
            proc.send_signal(signal.SIGKILL)
            with trio.fail_after(10):
                await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.aclose()
        names = sorted(p.name for p in state.iterdir())
        temps = [n for n in names if n.endswith(".tmp")]
        assert len(temps) <= 1, names  # the next resume sweeps it
        if "kill.json" in names:
            _check_generation(state / "kill.json")
    assert (state / "kill.json").exists()


def test_append_keeps_a_turn_another_process_saved_meanwhile(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    first = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A"}]
    save_session(state, SessionState(session_id="s", messages=first))
    # Two resumes of "s" loaded the same history; both then finish a turn.
    assert load_session(state, "s").messages == first
    mine = [{"role": "user", "content": "b"}, {"role": "assistant", "content": "B"}]
    theirs = [{"role": "user", "content": "c"}, {"role": "assistant", "content": "C"}]
    append_session(state, "s", theirs)
    stored = append_session(state, "s", mine)
    assert stored.messages == first + theirs + mine
    assert load_session(state, "s").messages == first + theirs + mine


def test_a_held_session_lock_is_session_busy_after_the_bound(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    save_session(state, SessionState(session_id="s", messages=[{"role": "user", "content": "x"}]))
    monkeypatch.setattr(_history, "LOCK_TIMEOUT", 0.0)
    # Another holder (flock locks belong to an open file, so one of our own does).
    fd = os.open(Path(state) / ".s.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert code_of(append_session, state, "s", [{"role": "user", "content": "y"}]) == "session_busy"
        assert code_of(load_session, state, "s") == "session_busy"
    finally:
        os.close(fd)
    assert append_session(state, "s", [{"role": "user", "content": "y"}]).messages[-1]["content"] == "y"


def test_a_symlinked_session_lock_is_refused(tmp: Path) -> None:
    state = prepare_state_dir(str(tmp / "s"))
    (Path(state) / ".s.lock").symlink_to(tmp / "elsewhere")
    assert code_of(load_session, state, "s") == "unsafe_session_state_target"
    assert not (tmp / "elsewhere").exists()
