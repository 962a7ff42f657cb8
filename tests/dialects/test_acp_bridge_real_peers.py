"""``agentrt bridge --to acp`` hosting Gemini CLI and Codex (``codex-acp``), the real peers of ``.peers/``.

An ACP client (a plain JSON-RPC client on the bridge's pipes) sees what the
hosted agent offers in its ``session/new`` answer: Gemini's ``models`` and, of
its modes, those that keep agentrt's approval in charge; Codex's model and
reasoning config options.  Its switches go to the hosted agent, which the
model calls prove (the fake APIs see the chosen model).  A tool the agent asks
for is asked of the client; its answers (allow, always, deny) decide and are
in ``agentrt logs --approvals`` as ``run`` records them.  ``session/load`` in
a new bridge resumes the hosted agent's own session.  ``session/cancel``
mid-reply answers the prompt ``cancelled``, the session goes on, and no process
of the hosted agent's group outlives the bridge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt.testing.real_peers import (
    BOUND,
    PEER_LIST,
    Peer,
    age_gemini_chat,
    agentrt_env,
    fake_api,
)

from ..plugin_data import ACP_FIXTURES

sys.path.insert(0, str(ACP_FIXTURES))
from acp_line_client import line_client

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
BRIDGE = [AGENTRT, "bridge", "--to", "acp"]
peers = pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)



def _work(tmp_path: Path) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return str(work)


def _prompt(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


@peers
async def test_new_session_offers_the_hosted_agents_models_and_switches_reach_it(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    with fake_api(peer, reply="Switched.") as api:
        env = agentrt_env(peer, tmp_path, api.url)
        with trio.fail_after(BOUND * 2):  # hang guard only
            async with line_client(BRIDGE, env, work) as client:
                new = await client.open(work)
                assert "result" in new, new
                result = new["result"]
                sid = result["sessionId"]
                if peer.name == "gemini":
                    models = result["models"]
                    assert models["currentModelId"] == peer.model  # the launch's model, set in the hosted session
                    assert "gemini-2.5-pro" in [m["modelId"] for m in models["availableModels"]]
                    # Of Gemini's modes (default, autoEdit, yolo, plan) only those that still ask agentrt.
                    assert [m["id"] for m in result["modes"]["availableModes"]] == ["default", "plan"]
                    assert result["modes"]["currentModeId"] == "default"
                    refused = await client.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
                    assert refused["error"]["code"] == -32602, refused
                    for mode in ("plan", "default"):
                        switched = await client.request("session/set_mode", {"sessionId": sid, "modeId": mode})
                        assert switched.get("result") == {}, switched
                    pick = {"sessionId": sid, "modelId": "gemini-2.5-pro"}
                    switched = await client.request("session/set_model", pick)
                    assert "result" in switched, switched
                    # Each mode switch is announced (after its answer, so read by now).
                    updates = [u["params"]["update"] for u in client.updates]
                    modes = [u["currentModeId"] for u in updates if u.get("sessionUpdate") == "current_mode_update"]
                    assert modes == ["plan", "default"], updates
                    chosen = "gemini-2.5-pro"
                else:
                    assert "models" not in result and "modes" not in result, result
                    (model,) = [o for o in result["configOptions"] if o["category"] == "model"]
                    assert model["currentValue"] == peer.model
                    assert "gpt-5.4-mini" in [o["value"] for o in model["options"]]
                    assert [o["category"] for o in result["configOptions"]] == ["model", "thought_level"]
                    pick = {"sessionId": sid, "configId": model["id"], "value": "gpt-5.4-mini"}
                    switched = await client.request("session/set_config_option", pick)
                    assert "result" in switched, switched
                    (now,) = [o for o in switched["result"]["configOptions"] if o["category"] == "model"]
                    assert now["currentValue"] == "gpt-5.4-mini"
                    chosen = "gpt-5.4-mini"
                done = await client.request("session/prompt", _prompt(sid, "hi"))
    assert done.get("result", {}).get("stopReason") == "end_turn", done
    assert client.text() == "Switched."
    if peer.name == "gemini":
        assert f"/models/{chosen}:streamGenerateContent" in [p for p, _ in api.requests if "stream" in p][-1]
    else:
        assert [body["model"] for body in api.calls("/responses")] == [chosen]


@peers
async def test_the_client_is_asked_and_its_answers_are_logged_as_run_logs_them(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    turns: dict[str, Any] = {}
    with fake_api(peer, tool_command="touch tool-ran.txt") as api:
        env = agentrt_env(peer, tmp_path, api.url)
        for answer in ("reject_once", "allow_always"):
            with trio.fail_after(BOUND * 2):  # hang guard only
                async with line_client(BRIDGE, env, work, answer=answer) as client:
                    sid = (await client.open(work))["result"]["sessionId"]
                    done = await client.request("session/prompt", _prompt(sid, "make the file"))
            turns[answer] = (client, done)
            if answer == "reject_once":
                assert not (Path(work) / "tool-ran.txt").exists()
    assert (Path(work) / "tool-ran.txt").exists()
    for answer, (client, done) in turns.items():
        assert len(client.asked) == 1, (answer, client.asked)
        assert "touch tool-ran.txt" in json.dumps(client.asked[0]["toolCall"])
        assert "result" in done, done
    logs = subprocess.run(
        [AGENTRT, "logs", "--approvals", "--json"], env=env, capture_output=True, text=True, timeout=BOUND, check=True
    ).stdout
    rows = sorted((json.loads(line) for line in logs.splitlines() if line.strip()), key=lambda r: r["at"])
    assert [(r["decision"], r["by"]) for r in rows] == [("deny", "user"), ("allow", "user:always")], rows


@peers
async def test_session_load_in_a_new_bridge_resumes_the_hosted_session(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    with fake_api(peer, reply="First answer.", pieces=2) as api:
        env = agentrt_env(peer, tmp_path, api.url)
        with trio.fail_after(BOUND * 3):  # hang guard only
            async with line_client(BRIDGE, env, work) as client:
                sid = (await client.open(work))["result"]["sessionId"]
                first = await client.request("session/prompt", _prompt(sid, "remember this"))
                assert first.get("result", {}).get("stopReason") == "end_turn", first
            if peer.name == "gemini":
                # The hosted session's chat (Gemini CLI also starts an empty one of its own).
                chats = (tmp_path / "home" / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
                (chat,) = [c for c in chats if "remember this" in c.read_text()]
                age_gemini_chat(tmp_path / "home", chat.name.rsplit("-", 1)[1].split(".")[0])
            api.reply = "Second answer."
            async with line_client(BRIDGE, env, work) as client:
                init = await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                assert init["result"]["agentCapabilities"]["loadSession"] is True
                loaded = await client.request("session/load", {"sessionId": sid, "cwd": work, "mcpServers": []})
                assert "result" in loaded, loaded
                offered = loaded["result"]
                assert ("models" in offered) if peer.name == "gemini" else ("configOptions" in offered), offered
                client.updates.clear()  # the replayed history
                second = await client.request("session/prompt", _prompt(sid, "what did I say?"))
    assert second.get("result", {}).get("stopReason") == "end_turn", second
    assert client.text() == "Second answer."
    assert "remember this" in json.dumps(api.requests[-1][1])  # the hosted agent's own history went along


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@peers
async def test_session_cancel_mid_reply_answers_cancelled_and_leaves_no_process(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    with fake_api(peer, reply="A long reply the client stops.", hold=True) as api:
        env = agentrt_env(peer, tmp_path, api.url)
        try:
            with trio.fail_after(BOUND * 2):  # hang guard only
                async with line_client(BRIDGE, env, work) as client:
                    sid = (await client.open(work))["result"]["sessionId"]
                    agents = _children(client.proc.pid)  # the hosted agent, started for the session
                    assert agents, "no hosted agent under the bridge"
                    stopped = await client.prompt_then_cancel(sid, "talk")
                    api.release()  # the next reply streams whole
                    again = await client.request("session/prompt", _prompt(sid, "still there?"))
        finally:
            api.release()
    assert stopped.get("result") == {"stopReason": "cancelled"}, stopped
    assert "result" in again, again  # the session goes on after the cancel
    assert all(_group_gone(pid) for pid in agents), "a process of the hosted agent's group outlived the bridge"
