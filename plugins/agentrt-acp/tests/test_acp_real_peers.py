"""Gemini CLI and Codex (``codex-acp``), the real peers of ``.peers/``, hosted over ACP against fake APIs.

Each test runs for both peers: a reply streams in several deltas, a tool call
asks agentrt's permission policy (allowed: it runs; denied: it does not),
a cancel mid-reply ends the turn with exactly one ``turn_cancelled`` and
leaves no process behind, and ``session/load`` resumes the session without
counting the replayed history as the new turn's text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import open_conversation
from agentrt.events import (
    ControlRequest,
    Event,
    RawEvent,
    Status,
    TextDelta,
    ToolUse,
    TurnCompleted,
    TurnFailed,
)
from agentrt.permissions import PermissionDecision, PermissionRequest, deny_all
from agentrt.testing.real_peers import BOUND, PEER_LIST, Peer, age_gemini_chat, fake_api, launch
from agentrt_acp.codec import AcpDialect

# The real CLIs can take longer than the default 20 s to answer initialize on a busy machine.
PARENT = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AGENTRT_FIRST_OUTPUT_TIMEOUT": str(BOUND)}
peers = pytest.mark.parametrize("peer", PEER_LIST, ids=lambda p: p.name)


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    return tmp_path / "home", work


async def _turn(conv: Any, prompt: str) -> tuple[list[Event], Any]:
    events: list[Event] = []
    with trio.fail_after(BOUND):
        stream = conv.send(prompt)
        async for ev in stream:
            events.append(ev)
    return events, stream.terminal


def _text(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if isinstance(ev, TextDelta))


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@peers
async def test_reply_streams_in_deltas_with_usage(tmp_path: Path, peer: Peer) -> None:
    home, work = _dirs(tmp_path)
    reply = "One two three four five six seven eight."
    with fake_api(peer, reply=reply, pieces=4) as api:
        async with open_conversation(
            launch(peer, home, api.url), dialect=AcpDialect(), permission_policy=deny_all,
            parent_env=PARENT, cwd=str(work), term_grace=5,
        ) as conv:  # fmt: skip
            events, result = await _turn(conv, "hello")
    assert isinstance(result, TurnCompleted), result
    deltas = [ev for ev in events if isinstance(ev, TextDelta)]
    assert len(deltas) >= 4 and _text(events).endswith(reply)
    if peer.name == "gemini":  # usage in the prompt response's _meta.quota
        assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (10, 5)
    else:  # Codex reports the context window in usage_update (the fake API's total: 15 tokens)
        context = [ev for ev in events if isinstance(ev, Status) and ev.kind == "context"]
        assert context and context[-1].detail["used"] == 15, context
    assert [ev for ev in events if isinstance(ev, TurnCompleted | TurnFailed)] == [result]


@peers
@pytest.mark.parametrize("allow", [True, False], ids=["allow", "deny"])
async def test_tool_call_asks_the_policy(tmp_path: Path, peer: Peer, allow: bool) -> None:
    home, work = _dirs(tmp_path)
    asked: list[PermissionRequest] = []

    async def policy(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(allow=True) if allow else await deny_all(request)

    with fake_api(peer, tool_command="touch tool-ran.txt") as api:
        async with open_conversation(
            launch(peer, home, api.url), dialect=AcpDialect(), permission_policy=policy,
            parent_env=PARENT, cwd=str(work), term_grace=5,
        ) as conv:  # fmt: skip
            events, result = await _turn(conv, "make the file")
    if allow or peer.name == "gemini":
        assert isinstance(result, TurnCompleted), result
    else:  # Codex's only refusal is "Abort": it ends the turn itself, stopReason cancelled
        assert isinstance(result, TurnFailed) and result.code == "turn_cancelled", result
    assert len(asked) == 1, asked
    (control,) = [ev for ev in events if isinstance(ev, ControlRequest)]
    assert {o["kind"] for o in control.request["options"]} >= {"allow_once", "reject_once"}
    assert (work / "tool-ran.txt").exists() is allow
    if allow:
        assert [ev for ev in events if isinstance(ev, ToolUse)], "the tool call was not reported"
        assert _text(events).startswith("The tool said:")


@peers
async def test_cancel_mid_reply_one_terminal_no_leftover(tmp_path: Path, peer: Peer) -> None:
    home, work = _dirs(tmp_path)
    with fake_api(peer, reply="A reply that is cut short by the user.", hold=True) as api:
        async with open_conversation(
            launch(peer, home, api.url), dialect=AcpDialect(), permission_policy=deny_all,
            parent_env=PARENT, cwd=str(work), term_grace=5,
        ) as conv:  # fmt: skip
            events: list[Event] = []
            with trio.fail_after(BOUND):
                stream = conv.send("talk")
                async for ev in stream:
                    events.append(ev)
                    if isinstance(ev, TextDelta) and len([e for e in events if isinstance(e, TextDelta)]) == 1:
                        await conv.cancel_turn()
            proc = conv.process
            pgid = proc.pid if proc is not None else None
            api.release()
        assert pgid is not None
        terminals = [ev for ev in events if isinstance(ev, TurnCompleted | TurnFailed)]
        assert len(terminals) == 1 and isinstance(terminals[0], TurnFailed), terminals
        assert terminals[0].code == "turn_cancelled"
        assert conv.exit_status is not None
        assert _group_gone(pgid), "a process of the agent's group outlived the conversation"


@peers
async def test_resume_through_session_load(tmp_path: Path, peer: Peer) -> None:
    home, work = _dirs(tmp_path)
    with fake_api(peer, reply="First answer.", pieces=2) as api:
        spec = launch(peer, home, api.url)
        async with open_conversation(
            spec, dialect=AcpDialect(), permission_policy=deny_all, parent_env=PARENT, cwd=str(work), term_grace=5
        ) as conv:
            _, first = await _turn(conv, "remember this")
            assert isinstance(first, TurnCompleted), first
            session = conv.session_id
        assert session is not None
        if peer.name == "gemini":
            age_gemini_chat(home, session)
        api.reply = "Second answer."
        async with open_conversation(
            spec, dialect=AcpDialect(), permission_policy=deny_all, parent_env=PARENT, cwd=str(work),
            resume=session, term_grace=5,
        ) as conv:  # fmt: skip
            events, resumed = await _turn(conv, "what did I say?")
    assert isinstance(resumed, TurnCompleted), resumed
    assert resumed.session_id == session
    # The replayed history is raw replay, never this turn's text.
    assert _text(events) == "Second answer."
    assert [ev for ev in events if isinstance(ev, RawEvent) and ev.name.startswith("replay/")]
    # The resumed model call carried the earlier exchange.
    assert "remember this" in str(api.requests[-1][1])
