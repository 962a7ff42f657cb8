"""First-delta latency of ``agentrt agent``: provider's first body byte → first delta line on stdout.

A loopback SSE server (in this process) sends the response head, pauses so
the client is parked on the body, notes the time and writes the first
``data:`` event; the host side (also this process) notes when the agent's
first ``content_block_delta`` line arrives on the agent's stdout.  Both times
come from the same clock, so their difference is what the whole agent path
adds: HTTP parsing, SSE decoding, the turn loop, the dialect codec and the
pipe.

The baseline, in the same run, is a minimal child process (stdlib sockets,
no framework) that reads the same response and prints each data line: the
floor of one loopback hop plus one pipe hop plus a process wake-up.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio

AGENTRT = str(Path(os.path.realpath(sys.executable)).parent / "agentrt")
if not os.path.exists(AGENTRT):
    AGENTRT = str(Path(sys.executable).parent / "agentrt")
PYTHON = os.path.realpath(sys.executable)
TURNS = 40
PAUSE = 0.02  # head → first body byte: long enough for the client to block on the body

_BASELINE = r"""
import socket, sys
port = int(sys.argv[1])
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    body = b'{"model":"m","messages":[],"stream":true}'
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\n\r\n%s" % (len(body), body))
    buf = b""
    printed = False
    while True:
        data = s.recv(65536)
        if not data:
            break
        buf += data
        while b"\n\n" in buf and not printed:
            event, _, buf = buf.partition(b"\n\n")
            if b"data: {" in event:
                out.write(event[event.index(b"data: ") + 6:] + b"\n")
                out.flush()
                printed = True
    s.close()
"""


def _event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


_FIRST = _event({"choices": [{"index": 0, "delta": {"content": "first"}}]})
_REST = (
    _event({"choices": [{"index": 0, "delta": {"content": " rest"}}]})
    + _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    + _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    + b"data: [DONE]\n\n"
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _Server:
    """One response per connection; records when each first body byte was written."""

    def __init__(self) -> None:
        self.first_byte: list[float] = []
        self.port = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            buf = b""
            with trio.fail_after(10):
                while b"\r\n\r\n" not in buf:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    rest += data
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            )
            await trio.sleep(PAUSE)
            self.first_byte.append(time.perf_counter())
            await stream.send_all(_chunk(_FIRST))
            await stream.send_all(_chunk(_REST) + b"0\r\n\r\n")


async def _read_line(stream: Any, buf: bytearray) -> bytes:
    while b"\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            raise RuntimeError("the child closed its stdout")
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


async def _measure(argv: list[str], env: dict[str, str], server: _Server, agent: bool) -> list[float]:
    server.first_byte.clear()
    out: list[float] = []
    proc = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        buf = bytearray()
        for i in range(TURNS):
            line = orjson.dumps({"type": "user", "message": {"role": "user", "content": f"turn {i}"}}) + b"\n"
            await proc.stdin.send_all(line)
            seen = None
            with trio.fail_after(30):
                while True:
                    got = await _read_line(proc.stdout, buf)
                    now = time.perf_counter()
                    if seen is None and (not agent or b'"content_block_delta"' in got):
                        seen = now
                    if not agent or b'"type":"result"' in got:
                        break
            assert seen is not None
            out.append(seen - server.first_byte[i])
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # The first turn pays for imports and connection setup: report steady state.
    return out[1:]


def _summary(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    return {
        "median_ms": round(statistics.median(ms), 3),
        "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 3),
        "max_ms": round(ms[-1], 3),
    }


async def _run(tmp: str) -> dict[str, Any]:
    server = _Server()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, host="127.0.0.1"), server.handle, 0)
        server.port = listeners[0].socket.getsockname()[1]
        base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8"}
        baseline = await _measure([PYTHON, "-c", _BASELINE, str(server.port)], base_env, server, agent=False)
        agent_env = {
            **base_env,
            "AGENTRT_API_BASE_URL": f"http://127.0.0.1:{server.port}/v1",
            "AGENTRT_MODEL": "bench-model",
            "AGENTRT_STATE_DIR": os.path.join(tmp, "state"),
            "AGENTRT_LOAD_PLUGINS": "openai,awp-jsonl",
        }
        agent = await _measure([AGENTRT, "agent"], agent_env, server, agent=True)
        nursery.cancel_scope.cancel()
    a, b = _summary(agent), _summary(baseline)
    return {
        "turns": len(agent),
        "agent": a,
        "baseline": b,
        "agent_added_median_ms": round(a["median_ms"] - b["median_ms"], 3),
        "ratio_median": round(a["median_ms"] / b["median_ms"], 2) if b["median_ms"] else None,
    }


def main() -> dict[str, Any]:
    """Run the benchmark; print a small table and return the figures."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o700)
        figures = trio.run(_run, tmp)
    print(f"first-delta latency over {figures['turns']} turns (provider first byte -> delta line on stdout)")
    for name in ("baseline", "agent"):
        f = figures[name]
        print(f"  {name:9} median {f['median_ms']:7.3f} ms   p90 {f['p90_ms']:7.3f} ms   max {f['max_ms']:7.3f} ms")
    print(f"  agent adds {figures['agent_added_median_ms']:.3f} ms over the baseline (median)")
    return figures


if __name__ == "__main__":
    main()
