"""``agentrt bridge --to acp`` hosting an ACP agent: the hosted session opens before the client's is answered.

A hosted agent that cannot open its session fails the client's ``session/new``
with a JSON-RPC error carrying the stable code and the reason (its exit and
last stderr, its refused handshake, its silence past the bound); stdout
carries JSON-RPC only.  An agent that offers no models or modes gets no switch
offered.  Real parts: the bridge is a real subprocess, the hosted agents real
processes (a script, the standard-library fixture agent).  The real peers'
offers are in ``test_acp_bridge_real_peers.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from ..plugin_data import ACP_FIXTURES

sys.path.insert(0, str(ACP_FIXTURES))
from acp_line_client import line_client

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
RAW_AGENT = Path(__file__).parent / "fixtures" / "acp_raw_agent.py"
BOUND = 60  # hang guard only

DIES = "import sys\nsys.stderr.write('no credentials configured\\n')\nsys.exit(3)\n"
SILENT = "import sys\nsys.stdin.read()\n"


def _env(tmp_path: Path, body: str, **extra: str) -> dict[str, str]:
    exe = tmp_path / "agent"
    exe.write_text(f"#!{sys.executable}\n{body}")
    exe.chmod(0o755)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
        "AGENTRT_CONFIG": str(tmp_path / "none.toml"), "AWP_AGENT_CLI_EXECUTABLE": str(exe),
        "AWP_AGENT_CLI_PROTOCOL": "acp", **extra,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("body", "extra", "code", "says"),
    [
        (DIES, {}, "exit_before_result", "the hosted agent exited before it could open its session; "
                                          "its last words: no credentials configured"),
        (f"import runpy\nrunpy.run_path({str(RAW_AGENT)!r}, run_name='__main__')\n", {"ACP_RAW_MODE": "bad_init"},
         "unsupported_protocol_version", "the agent speaks ACP version None"),
        (SILENT, {"AGENTRT_FIRST_OUTPUT_TIMEOUT": "1"}, "session_open_timeout",
         "the hosted agent did not open its session within 1 s"),
    ],
    ids=["exits", "refuses-initialize", "silent"],
)
async def test_a_hosted_agent_that_cannot_open_its_session_fails_session_new_with_the_reason(
    tmp_path: Path, body: str, extra: dict[str, str], code: str, says: str
) -> None:
    env = _env(tmp_path, body, **({"AWP_AGENT_CLI_ENV_JSON": json.dumps(extra)} if "ACP_RAW_MODE" in extra else extra))
    with trio.fail_after(BOUND):
        async with line_client([AGENTRT, "bridge", "--to", "acp"], env, str(tmp_path)) as client:
            new = await client.open(str(tmp_path))
    assert "result" not in new, new
    error = new["error"]
    assert error["code"] == -32603 and error["data"] == {"code": code}, error
    assert error["message"].startswith(f"{code}: {says}"), error


async def test_an_agent_offering_no_models_or_modes_gets_no_switch_offered(tmp_path: Path) -> None:
    env = _env(tmp_path, f"import runpy\nrunpy.run_path({str(RAW_AGENT)!r}, run_name='__main__')\n")
    with trio.fail_after(BOUND):
        async with line_client([AGENTRT, "bridge", "--to", "acp"], env, str(tmp_path)) as client:
            new = await client.open(str(tmp_path))
            sid = new["result"]["sessionId"]
            mode = await client.request("session/set_mode", {"sessionId": sid, "modeId": "default"})
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            done = await client.request("session/prompt", prompt)
    assert set(new["result"]) == {"sessionId"}, new
    assert mode["error"]["code"] == -32601, mode
    assert done["result"]["stopReason"] == "end_turn", done


def test_a_forwarded_switchs_error_is_relayed_as_the_agent_gave_it() -> None:
    from agentrt_acp.codec import AcpAgentCodec

    codec = AcpAgentCodec()
    codec.options.use_hosted({"models": {"availableModels": [{"modelId": "a"}, {"modelId": "b"}],
                                         "currentModelId": "a"}})  # fmt: skip
    error = {"code": -32603, "message": "Internal error", "data": {"details": "quota exhausted for b"}}
    (relayed,) = codec.answer_forwarded("model", 7, "b", {"jsonrpc": "2.0", "id": 3, "error": error})
    assert relayed == {"jsonrpc": "2.0", "id": 7, "error": error}
    assert codec.options.fields()["models"]["currentModelId"] == "a"  # unchanged
    (ok,) = codec.answer_forwarded("model", 8, "b", {"jsonrpc": "2.0", "id": 4, "result": {}})
    assert ok == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert codec.options.fields()["models"]["currentModelId"] == "b"


def test_the_set_up_requests_follow_what_the_agent_offers() -> None:
    from agentrt_acp._setup import setup_requests

    listed = {"models": {"availableModels": [{"modelId": "a"}], "currentModelId": "a"}}
    grouped = {"configOptions": [
        {"id": "effort", "category": "thought_level", "options": [{"value": "low"}]},
        {"id": "m", "category": "model", "currentValue": "x",
         "options": [{"group": "fast", "name": "Fast", "options": [{"value": "x"}, {"value": "y"}]}]},
    ]}  # fmt: skip
    modes = {"modes": {"availableModes": [{"id": "default"}, {"id": "plan"}], "currentModeId": "default"}}
    # `models` listed: set_model, whatever the value (the agent answers for it).
    assert setup_requests(listed, "s", "b", None) == ([("session/set_model", {"sessionId": "s", "modelId": "b"})], None)
    # A model config option (in a named group): set_config_option, only when offered and not current.
    assert setup_requests(grouped, "s", "y", None) == (
        [("session/set_config_option", {"sessionId": "s", "configId": "m", "value": "y"})], None)
    assert setup_requests(grouped, "s", "x", None) == ([], None)
    steps, refused = setup_requests(grouped, "s", "z", None)
    assert steps == [] and refused == "the agent offers no model 'z' (it offers: x, y)"
    # Nothing offered: nothing asked.  A mode only when listed and not current.
    assert setup_requests({}, "s", "z", "plan") == ([], None)
    assert setup_requests(modes, "s", None, "plan") == ([("session/set_mode", {"sessionId": "s", "modeId": "plan"})],
                                                        None)
    assert setup_requests(modes, "s", None, "default") == ([], None)
    assert setup_requests(modes, "s", None, "yolo") == ([], None)


def test_the_client_sees_only_approval_keeping_modes_and_safe_option_categories() -> None:
    from agentrt_acp._session_options import SessionOptions

    options = SessionOptions()
    options.use_hosted({
        "modes": {"availableModes": [{"id": m} for m in ("default", "autoEdit", "yolo", "plan")],
                  "currentModeId": "default"},
        "configOptions": [{"id": "m", "category": "model", "options": [{"value": "x"}]},
                          {"id": "approvals", "category": "_permissions", "options": [{"value": "never"}]}],
    })  # fmt: skip
    fields = options.fields()
    assert [m["id"] for m in fields["modes"]["availableModes"]] == ["default", "plan"]
    assert [o["id"] for o in fields["configOptions"]] == ["m"]
    assert options.has_mode("plan") and not options.has_mode("yolo")
    assert options.has_option("m", "x") and not options.has_option("approvals", "never")
    options.use_hosted({"modes": {"availableModes": [{"id": "yolo"}], "currentModeId": "yolo"}})
    assert "modes" not in options.fields()  # an agent already in a mode that does not ask offers none
