"""``agentrt run --protocol acp`` with Gemini CLI and Codex (``codex-acp``), the real peers of ``.peers/``.

As a user runs them (the launch contract's variables, a private HOME and
database): the reply streams as several ``text_delta`` lines (the first on
stdout while the model API still holds the rest), ``-m`` picks Codex's model
through its config option, a tool is
refused by default and runs with ``--allow-tool execute`` (both decisions in
``agentrt logs --approvals``), Ctrl-C mid-reply ends the turn with exactly one
terminal event, exit 130 and no process of the agent's group left, and
``run -c`` continues the session through ``session/load``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt.testing.real_peers import BOUND, PEER_LIST, Peer, age_gemini_chat, agentrt_env, fake_api

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
TERMINAL = {"turn_completed", "turn_failed"}
peers = pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)



def _run(env: dict[str, str], work: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [AGENTRT, "run", "--json", *args], env=env, cwd=work, capture_output=True, text=True, timeout=BOUND
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _text(lines: list[dict[str, Any]]) -> str:
    return "".join(line["text"] for line in lines if line["type"] == "text_delta")


def _terminals(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] in TERMINAL]


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@peers
def test_run_streams_and_records_allow_and_deny(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    with fake_api(peer, tool_command="touch tool-ran.txt") as api:
        env = agentrt_env(peer, tmp_path, api.url)
        denied_status, denied = _run(env, work, "make the file")
        assert not (work / "tool-ran.txt").exists()
        status, allowed = _run(env, work, "--allow-tool", "execute", "make the file")
    assert (work / "tool-ran.txt").exists(), allowed
    assert status == 0, allowed
    (done,) = _terminals(allowed)
    assert done["type"] == "turn_completed"
    assert len([line for line in allowed if line["type"] == "text_delta"]) >= 4
    assert _text(allowed).startswith("The tool said:")
    # Denied: Gemini goes on and completes; Codex's only refusal aborts its turn (stopReason cancelled).
    (refused,) = _terminals(denied)
    assert refused["type"] == "turn_completed" or refused.get("code") == "turn_cancelled", refused
    assert denied_status in (0, 1, 130), denied
    logs = subprocess.run(
        [AGENTRT, "logs", "--approvals", "--json"], env=env, capture_output=True, text=True, timeout=BOUND, check=True
    ).stdout
    rows = [json.loads(line) for line in logs.splitlines() if line.strip()]
    assert sorted(r["decision"] for r in rows) == ["allow", "deny"], rows
    assert all("touch tool-ran.txt" in r["tool"] + r["summary"] for r in rows), rows


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


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@peers
async def test_ctrl_c_mid_reply_one_terminal_event_no_leftover(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    with fake_api(peer, reply="A long reply the user stops.", hold=True) as api:
        env = agentrt_env(peer, tmp_path, api.url)
        with trio.fail_after(BOUND):  # hang guard only
            proc = await trio.lowlevel.open_process(
                [AGENTRT, "run", "--json", "talk"], env=env, cwd=work, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                assert proc.stdout is not None
                buffer, lines = b"", []
                while not any(line["type"] == "text_delta" for line in lines):
                    chunk = await proc.stdout.receive_some()
                    assert chunk, "run ended before the reply streamed"
                    buffer += chunk
                    *done, buffer = buffer.split(b"\n")
                    lines += [json.loads(line) for line in done if line.strip()]
                agents = _children(proc.pid)
                assert agents, "no agent process under run"
                proc.send_signal(signal.SIGINT)
                while chunk := await proc.stdout.receive_some():
                    buffer += chunk
                status = await proc.wait()
            finally:
                api.release()
                if proc.returncode is None:
                    proc.kill()
                    with trio.CancelScope(shield=True):
                        await proc.wait()
    lines += [json.loads(line) for line in buffer.split(b"\n") if line.strip()]
    assert status == 130
    (terminal,) = _terminals(lines)
    assert terminal["type"] == "turn_failed" and terminal["code"] == "turn_cancelled", terminal
    assert all(_group_gone(pid) for pid in agents), "a process of the agent's group outlived run"


@peers
def test_run_continue_loads_the_session(tmp_path: Path, peer: Peer) -> None:
    work = _work(tmp_path)
    with fake_api(peer, reply="First answer.", pieces=2) as api:
        env = agentrt_env(peer, tmp_path, api.url)
        status, first = _run(env, work, "remember this")
        assert status == 0, first
        (done,) = _terminals(first)
        if peer.name == "gemini":
            age_gemini_chat(tmp_path / "home", done["session_id"])
        api.reply = "Second answer."
        status, second = _run(env, work, "-c", "what did I say?")
    assert status == 0, second
    (resumed,) = _terminals(second)
    assert resumed["type"] == "turn_completed" and resumed["session_id"] == done["session_id"]
    assert _text(second) == "Second answer."  # the replayed history is not this turn's text
    assert "remember this" in json.dumps(api.requests[-1][1])


def test_codex_takes_the_model_through_its_config_option(tmp_path: Path) -> None:
    # codex-acp lists its models as a config option (category model), not as `models`.
    from agentrt.testing.real_peers import CODEX_PEER

    work = _work(tmp_path)
    with fake_api(CODEX_PEER, reply="Small model here.") as api:
        env = agentrt_env(CODEX_PEER, tmp_path, api.url)
        status, lines = _run(env, work, "--no-log", "-m", "gpt-5.4-mini", "hi")
        assert status == 0, lines
        assert _text(lines) == "Small model here."
        assert [body["model"] for body in api.calls("/responses")] == ["gpt-5.4-mini"]
        status, lines = _run(env, work, "--no-log", "-m", "no-such-model", "hi")
    assert status == 1, lines  # the turn failed (not a runtime failure: exit 3 is for those)
    (failed,) = _terminals(lines)
    assert failed["code"] == "model_not_set", failed
    assert "no model 'no-such-model' (it offers: gpt-5.5, gpt-5.4, gpt-5.4-mini" in failed["message"]
    assert len(api.calls("/responses")) == 1  # the refused model reached no model call


@peers
async def test_run_writes_each_delta_as_it_comes_not_at_the_end(tmp_path: Path, peer: Peer) -> None:
    # The fake API holds the reply after its first piece: that piece must reach run's stdout while it holds.
    work = _work(tmp_path)
    with fake_api(peer, reply="One two three four five six.", pieces=3, hold=True) as api:
        env = agentrt_env(peer, tmp_path, api.url)
        with trio.fail_after(BOUND):  # hang guard only
            proc = await trio.lowlevel.open_process(
                [AGENTRT, "run", "--json", "--no-log", "talk"], env=env, cwd=work, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                assert proc.stdout is not None
                buffer, before = b"", []
                while not any(line["type"] == "text_delta" for line in before):
                    chunk = await proc.stdout.receive_some()
                    assert chunk, "run ended before the reply streamed"
                    buffer += chunk
                    *done, buffer = buffer.split(b"\n")
                    before += [json.loads(line) for line in done if line.strip()]
                assert not _terminals(before), before  # the turn is still going
                api.release()
                while chunk := await proc.stdout.receive_some():
                    buffer += chunk
                status = await proc.wait()
            finally:
                api.release()
                if proc.returncode is None:
                    proc.kill()
                    with trio.CancelScope(shield=True):
                        await proc.wait()
    after = [json.loads(line) for line in buffer.split(b"\n") if line.strip()]
    assert status == 0, after
    assert [line for line in after if line["type"] == "text_delta"], "no delta came after the release"
    (done,) = _terminals(before + after)
    assert done["type"] == "turn_completed"
    assert _text(before + after) == "One two three four five six."
