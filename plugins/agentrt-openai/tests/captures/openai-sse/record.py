"""Record the OpenAI-compatible streaming captures here, from mock servers run offline on loopback.

Usage: ``RECORDER_VENV/bin/python plugins/agentrt-openai/tests/captures/openai-sse/record.py [NAME ...]``
(all by default), with a virtualenv holding the servers (see README.md here: ``pip install llmock fakellm
'litellm[proxy]'``); the servers are the ``llmock``, ``fakellm`` and ``litellm`` executables beside
that Python.  Each server is started on a free loopback port, sent one streaming
``POST /v1/chat/completions`` (with http.client, so the body is the bytes the server sent, chunked
transfer decoded), and stopped.  Writes ``X.sse`` (the body) or, for ``.txt`` names, the status
line, the headers and the body; and ``X.cmd.txt`` (the server's command and configuration, the
request, the server's version).  Nothing is edited.  Not a test: run by hand.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
READY_S = 240.0  # a hang guard: LiteLLM's proxy takes up to a minute to start on a busy machine

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}

FAKELLM_YAML = """\
version: 1
rules:
  - name: weather
    when:
      tools_include: get_weather
    respond:
      tool_calls:
        - name: get_weather
          arguments: {city: Paris}
  - name: text
    when:
      messages_contain: "hello"
    respond:
      content: "Hello from fakellm, one word at a time."
"""

LITELLM_YAML = """\
model_list:
  - model_name: mock-text
    litellm_params:
      model: openai/mock-text
      api_key: sk-unused
      mock_response: "Hello from the LiteLLM mock. This is streamed in pieces."
general_settings:
  master_key: sk-agentrt-recording-0f3c9a7d2b514e68
"""


@dataclass(frozen=True)
class Server:
    name: str  # the executable and its distribution
    argv: Callable[[int, Path], list[str]]  # (port, scratch directory) -> argv
    files: dict[str, str] = field(default_factory=dict)  # configuration written to the scratch directory
    ready: str = "/v1/models"
    env: dict[str, str] = field(default_factory=dict)
    key: str = "sk-test"  # the bearer token sent


SERVERS = {
    "llmock": Server("llmock", lambda port, _: ["serve", "--host", "127.0.0.1", "--port", str(port)]),
    "fakellm": Server(
        "fakellm",
        lambda port, d: ["serve", "--host", "127.0.0.1", "--port", str(port), "--config", str(d / "fakellm.yaml")],
        {"fakellm.yaml": FAKELLM_YAML},
        ready="/v1/models",
    ),
    "litellm": Server(
        "litellm",
        lambda port, d: ["--host", "127.0.0.1", "--port", str(port), "--config", str(d / "litellm.yaml")],
        {"litellm.yaml": LITELLM_YAML},
        ready="/health/liveliness",
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},  # offline: the cost map shipped in the package
        key="sk-agentrt-recording-0f3c9a7d2b514e68",  # the proxy's master key (litellm.yaml)
    ),
}


@dataclass(frozen=True)
class Capture:
    name: str
    server: str
    body: dict[str, Any]
    setup: list[dict[str, Any]] = field(default_factory=list)  # llmock behaviours queued first
    what: str = ""


def _chat(model: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], "stream": True, **extra}


USAGE = {"stream_options": {"include_usage": True}}
CAPTURES = [
    Capture(
        "llmock-tools-stream.txt",
        "llmock",
        _chat("gpt-4o-mini", "What is the weather?", tools=[WEATHER], **USAGE),
        what="headers and body: a fragmented tool call, usage in a chunk with `choices: []`",
    ),
    Capture(
        "llmock-fault-truncate.sse",
        "llmock",
        _chat("gpt-4o-mini", "Say something"),
        [{"type": "stream_fault", "kind": "truncate", "after_chunks": 2}],
        "the stream ends cleanly after two chunks: no finish_reason, no `[DONE]`",
    ),
    Capture(
        "fakellm-tools-stream.sse",
        "fakellm",
        _chat("gpt-4o-mini", "What is the weather?", tools=[WEATHER], **USAGE),
        what="tool arguments in four pieces, spaces in the JSON, no usage",
    ),
    Capture(
        "fakellm-text-stream.sse",
        "fakellm",
        _chat("gpt-4o-mini", "hello", **USAGE),
        what="one word per chunk, spaces in the JSON, no usage although `include_usage` was asked",
    ),
    Capture(
        "litellm-mock-text-stream.sse",
        "litellm",
        _chat("mock-text", "hello", **USAGE),
        what="text in 3-character pieces; the usage chunk carries a non-empty `choices` (not per spec)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _request(port: int, method: str, path: str, body: Any = None, key: str = "sk-test") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = None if body is None else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    conn.request(method, path, body=data, headers=headers)
    return conn.getresponse()


@contextmanager
def running(server: Server) -> Iterator[tuple[int, list[str]]]:
    """The server on a free loopback port until the block ends; yields (port, argv as shown)."""
    with tempfile.TemporaryDirectory(prefix=f"record-{server.name}-") as scratch:
        d = Path(scratch)
        for name, text in server.files.items():
            (d / name).write_text(text)
        port = _free_port()
        argv = [str(BIN / server.name), *server.argv(port, d)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch, "LANG": "C.UTF-8", **server.env}
        proc = subprocess.Popen(
            argv, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            deadline = time.monotonic() + READY_S
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"{server.name} exited ({proc.returncode}) before it answered")
                try:
                    _request(port, "GET", server.ready).read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{server.name} did not answer within {READY_S:.0f} s") from None
                    time.sleep(0.2)  # polling a server's start: nothing to wait on but its port
            shown = [server.name, *(a.replace(scratch, "<DIR>") for a in argv[1:])]
            yield port, [str(p).replace(str(port), "<PORT>") for p in shown]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def record(capture: Capture, port: int, shown: list[str]) -> None:
    server = SERVERS[capture.server]
    for behavior in capture.setup:
        done = _request(port, "POST", "/_llmock/scenario", {"behaviors": [behavior]})
        assert done.status == 201, done.read()
        done.read()
    response = _request(port, "POST", "/v1/chat/completions", capture.body, server.key)
    body = response.read()
    if capture.name.endswith(".txt"):
        head = f"HTTP/1.1 {response.status} {response.reason}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in response.getheaders())
        (HERE / capture.name).write_bytes(head.encode("latin-1") + b"\r\n" + body)
    else:
        (HERE / capture.name).write_bytes(body)
    stem = capture.name.rsplit(".", 1)[0]
    config = "".join(f"# {name}:\n{text}" for name, text in server.files.items())
    env = "".join(f" {k}={v}" for k, v in server.env.items())
    lines = [
        f"# capture: {capture.name}: {capture.what}",
        f"# server: {server.name} {metadata.version(server.name)} (PyPI), on 127.0.0.1:<PORT>{env}",
        " ".join(shown),
        *(f"# queued first: POST /_llmock/scenario {json.dumps({'behaviors': [b]})}" for b in capture.setup),
        f"# request: POST /v1/chat/completions (HTTP/1.1, authorization: Bearer {server.key})",
        json.dumps(capture.body),
        f"# response: HTTP {response.status}, {len(body)} body bytes",
    ]
    (HERE / f"{stem}.cmd.txt").write_text("\n".join(lines) + "\n" + config)
    print(f"{capture.name}: HTTP {response.status}, {len(body)} bytes", file=sys.stderr)


def main(names: list[str]) -> int:
    chosen = [c for c in CAPTURES if not names or c.name in names]
    if names and len(chosen) != len(set(names)):
        raise SystemExit(f"unknown captures: {sorted(set(names) - {c.name for c in CAPTURES})}")
    for server_name in dict.fromkeys(c.server for c in chosen):
        if not (BIN / server_name).is_file():
            raise SystemExit(f"{BIN / server_name} is missing: run this with the recording virtualenv's python")
        with running(SERVERS[server_name]) as (port, shown):
            for capture in chosen:
                if capture.server == server_name:
                    record(capture, port, shown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
