"""``agentrt run --json`` with tool inputs and results: written through when exact, else parsed and encoded.

A fixture agent replays stream-json lines whose tool payloads are canonical or
odd (invalid UTF-8, lone surrogate escapes, integers past 64 bits, numbers
that overflow, duplicate keys, whitespace); every printed line must be one
line of valid UTF-8 JSON with the value of the event's JSON form.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson

from agentrt._plugins import Plugins
from agentrt.events import to_json
from agentrt.lowlevel import JsonlReader

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
AGENT = Path(__file__).with_name("_replay_agent.py")

PAYLOADS = [
    b'{"file_path":"a.py","old_string":"caf\xc3\xa9 \\"x\\"\\n","new_string":"y"}',
    b'"plain \xe2\x86\x92 result\\n"',
    b'[{"type":"text","text":"out"}]',
    b'"caf\\u00e9 \\/ spelled"',
    b'{"command":"ls\xff -l"}',
    b'"git \\ud83d status"',
    b'{"limit":18446744073709551616,"n":1}',
    b'{"x":1e400}',
    b'{"command":"a","command":"b"}',
    b'{"a": 1,\r"b":2}',
]


def _lines() -> bytes:
    out = []
    for i, payload in enumerate(PAYLOADS):
        out.append(b'{"type":"assistant","message":{"id":"m%d","content":[{"type":"tool_use","id":"t%d",'
                   b'"name":"Bash","input":%s}]},"session_id":"s-1"}' % (i, i, payload))
        out.append(b'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t%d",'
                   b'"type":"tool_result","content":%s,"is_error":false}]},"session_id":"s-1"}' % (i, payload))
    out.append(b'{"type":"result","subtype":"success","is_error":false,"result":"","session_id":"s-1"}')
    return b"\n".join(out) + b"\n"


def test_run_json_prints_tool_payloads_as_valid_lines_of_their_values(tmp_path: Path) -> None:
    blob = _lines()
    (tmp_path / "out.jsonl").write_bytes(blob)
    exe = tmp_path / "replay-agent"
    exe.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[1:] = [{str(tmp_path / 'out.jsonl')!r}]\n"
        f"runpy.run_path({str(AGENT)!r}, run_name='__main__')\n"
    )
    exe.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "AWP_AGENT_CLI_EXECUTABLE": str(exe), "AWP_AGENT_CLI_PROTOCOL": "stream-json"}
    proc = subprocess.run([AGENTRT, "run", "--no-log", "--json", "go"], env=env, capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert b"\r" not in proc.stdout
    lines = proc.stdout.decode("utf-8").splitlines()
    printed = [json.loads(line) for line in lines]
    tools = [ev for ev in printed if ev["type"] in ("tool_use", "tool_result")]
    # The events of the plain parse (no typed loader, so no fragments), as JSON values.
    codec = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "stream-json"}).dialect("stream-json").host_codec()
    decoded = [ev for obj in JsonlReader().feed(blob) for ev in codec.decode(obj)]
    plain = [orjson.loads(orjson.dumps(to_json(ev))) for ev in decoded]
    expected = [ev for ev in plain if ev["type"] in ("tool_use", "tool_result")]
    assert len(tools) == 2 * len(PAYLOADS)
    assert tools == expected
    assert [orjson.loads(line) for line in lines if '"tool_' in line[:20]] == expected
    # The exact payloads went through as the agent wrote them: the escapes of the
    # fourth would have been rewritten ("caf\u00e9 \/" as "café /") by a parse and encode.
    for payload in PAYLOADS[:4]:
        # An object is both a tool input and a tool result; any other value only a result.
        assert proc.stdout.count(payload) == (2 if payload.startswith(b"{") else 1), payload
