"""`agentrt run`'s stdout on a real pipe: everything, in order; and a reader that goes away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
AGENT = Path(__file__).with_name("_delta_agent.py")


def _env(tmp: Path, count: int) -> dict[str, str]:
    exe = tmp / "delta-agent"
    exe.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[1:] = [{str(count)!r}, {str(tmp / 'agent.pid')!r}]\n"
        f"runpy.run_path({str(AGENT)!r}, run_name='__main__')\n"
    )
    exe.chmod(0o755)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
            "AWP_AGENT_CLI_EXECUTABLE": str(exe), "AWP_AGENT_CLI_PROTOCOL": "stream-json"}


def test_plain_and_json_output_through_a_pipe_is_complete_and_in_order(tmp_path: Path) -> None:
    count = 30_000  # ~270 KB of text, ~1.6 MB of JSON: many pipe-fulls
    expected = "".join(f"<{i:07d}>" for i in range(count))
    env = _env(tmp_path, count)
    plain = subprocess.run([AGENTRT, "run", "go"], env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == expected + "\n"
    as_json = subprocess.run([AGENTRT, "run", "--json", "go"], env=env, capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    assert as_json.returncode == 0, as_json.stderr
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == expected
    assert events[-1]["type"] == "process_exited"


def test_a_closed_stdout_stops_the_agent_and_exits_3_with_output_closed(tmp_path: Path) -> None:
    env = _env(tmp_path, 0)  # the agent never ends its turn on its own
    proc = subprocess.Popen([AGENTRT, "run", "go"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.read(1000)  # the reply is streaming...
    proc.stdout.close()  # ...and its reader goes away
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    stderr = err.decode()
    assert proc.returncode == 3, stderr
    assert "agentrt: error: output_closed: " in stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    pid = int((tmp_path / "agent.pid").read_text())
    # The agent was stopped and reaped before agentrt exited (a live or zombie pid would still exist).
    assert not Path(f"/proc/{pid}").exists()


def test_the_text_delta_fast_path_prints_what_to_json_prints() -> None:
    import orjson
    import trio

    from agentrt._cli_run import _StdoutSink
    from agentrt.events import EventBatch, TextDelta, ThinkingDelta, to_json

    events = (TextDelta(text="a\u00e9\n\"", index=3), TextDelta(text=""), ThinkingDelta(text="t"))
    r, w = os.pipe()
    try:
        sink = _StdoutSink(True, fd=w)
        trio.run(sink.handle, EventBatch(source="c", first_seq=0, mono=0.0, wall=0.0, events=events))
        out = os.read(r, 1 << 16)
    finally:
        os.close(r)
        os.close(w)
    assert out == b"".join(orjson.dumps(to_json(ev)) + b"\n" for ev in events)


async def test_a_reader_that_lags_holds_the_agent_back_not_memory() -> None:
    """While nobody reads ``run``'s stdout, only a few decoded batches wait for it.

    Batches are fanned out to the stdout sink as ``run`` does; the pipe's
    reader reads nothing.  Once the producer is stuck, what was accepted is the
    pipe's worth, the sink's short buffer and the batch in hand, not a
    buffer's worth of whole chunks of the agent's output.
    """
    import trio
    import trio.testing

    from agentrt._cli_run import _StdoutSink
    from agentrt._fanout import Fanout
    from agentrt.events import EventBatch, TextDelta

    r, w = os.pipe()
    accepted = 0
    try:
        async with trio.open_nursery() as nursery:
            fanout = Fanout(nursery, [_StdoutSink(True, fd=w)])

            async def produce() -> None:
                nonlocal accepted
                for i in range(10_000):
                    await fanout.send(EventBatch(source="c", first_seq=i, mono=0.0, wall=0.0,
                                                 events=(TextDelta(text="x" * 16_384),)))
                    accepted += 1

            nursery.start_soon(produce)
            with trio.fail_after(60):  # a hang guard only
                await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    finally:
        os.close(r)
        os.close(w)
    # The pipe, grown once it filled, holds STDOUT_PIPE_SIZE of these (16 KiB each, plus
    # their JSON); the sink's buffer holds its few (2), and one is in hand.
    from agentrt._cli_run import STDOUT_PIPE_SIZE
    from agentrt._cli_run import _StdoutSink as sink

    in_pipe = STDOUT_PIPE_SIZE // 16_384
    assert sink.buffer_size <= accepted <= in_pipe + sink.buffer_size + 4, accepted


_BIG_DELTA_AGENT = r"""
import json, sys
sys.stdin.readline()
event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x" * 200_000}}
print(json.dumps({"type": "stream_event", "event": event, "session_id": "s-1"}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "", "session_id": "s-1"}))
sys.stdout.flush()
sys.stdin.read()
"""


def test_output_that_fills_the_stdout_pipe_grows_it(tmp_path: Path) -> None:
    import fcntl

    # One event line longer than a default pipe: its write fills the pipe whatever the reader does.
    exe = tmp_path / "big-delta-agent"
    exe.write_text(f"#!{sys.executable}\n{_BIG_DELTA_AGENT}")
    exe.chmod(0o755)
    env = {**_env(tmp_path, 1), "AWP_AGENT_CLI_EXECUTABLE": str(exe)}
    r, w = os.pipe()
    try:
        default = fcntl.fcntl(r, fcntl.F_GETPIPE_SZ)
        proc = subprocess.Popen([AGENTRT, "run", "--json", "go"], env=env, stdin=subprocess.DEVNULL, stdout=w,
                                stderr=subprocess.PIPE)
        os.close(w)
        w = -1
        out = b""
        while chunk := os.read(r, 1 << 20):
            out += chunk
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        from agentrt._cli_run import STDOUT_PIPE_SIZE

        assert default < STDOUT_PIPE_SIZE and fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) == STDOUT_PIPE_SIZE
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    texts = [json.loads(line).get("text") for line in out.splitlines()]
    assert "x" * 200_000 in texts
