"""The ACP clauses of ``agentrt check --protocol acp``.

They are judged from what the ACP host codec reports (its ``initialize`` raw
event, the prompt responses that end turns, its ``unexpected_response`` and
``unknown_session`` diagnostics) during the check's scripted turns, plus one
more conversation in which a prompt is cancelled after its first update.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import trio

__all__ = ["ACP_CLAUSES", "acp_clauses", "advertises_load_session"]

#: ACP's own clauses, in report order: (id, title).
ACP_CLAUSES: tuple[tuple[str, str], ...] = (
    ("acp_initialize_answered", "initialize answered with a protocolVersion"),
    ("acp_one_response_per_prompt", "exactly one response per session/prompt"),
    ("acp_updates_for_known_sessions", "session/update only for session ids the agent opened"),
    ("acp_cancel_honoured", "session/cancel ends the prompt with stopReason cancelled, in time"),
)

_HANDSHAKE_CODES = frozenset(
    {"acp_initialize_failed", "unsupported_protocol_version", "acp_session_new_failed", "acp_auth_required"}
)

Verdict = tuple[str, str]  # (status, detail)


def _initialize(events: Sequence[Any]) -> dict[str, Any] | None:
    from .events import RawEvent

    for ev in events:
        if isinstance(ev, RawEvent) and ev.name == "initialize" and isinstance(ev.raw, dict):
            return ev.raw
    for ev in events:  # a refused handshake ends the turn instead, the response in `raw`
        if getattr(ev, "code", None) in _HANDSHAKE_CODES and isinstance(ev.raw, dict) and "id" in ev.raw:
            return ev.raw
    return None


def advertises_load_session(events: Sequence[Any]) -> bool:
    """Whether the agent's ``initialize`` response advertised ``loadSession``."""
    response = _initialize(events)
    result = response.get("result") if response is not None else None
    caps = result.get("agentCapabilities") if isinstance(result, dict) else None
    return isinstance(caps, dict) and caps.get("loadSession") is True


def _initialize_answered(events: Sequence[Any]) -> Verdict:
    response = _initialize(events)
    if response is None:
        return "fail", "no response to initialize"
    result = response.get("result")
    if not isinstance(result, dict):
        return "fail", f"initialize answered with an error: {str(response.get('error'))[:120]}"
    version = result.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        return "fail", f"no integer protocolVersion in the response ({version!r})"
    return "pass", f"protocolVersion {version}"


def _is_prompt_response(ev: Any) -> bool:
    raw = ev.raw
    return isinstance(raw, dict) and "id" in raw and getattr(ev, "code", None) not in _HANDSHAKE_CODES


def _one_response_per_prompt(events: Sequence[Any], terminals: Sequence[Sequence[Any]], prompts: int) -> Verdict:
    from .events import Diagnostic

    stray = [ev for ev in events if isinstance(ev, Diagnostic) and ev.code == "unexpected_response"]
    if stray:
        return "fail", f"{len(stray)} response(s) to no request (a second response to a prompt?)"
    for number, ended in enumerate(terminals, 1):
        if len(ended) != 1:
            return "fail", f"prompt {number}: {len(ended)} terminal events"
        if not _is_prompt_response(ended[0]):
            return "fail", f"prompt {number} ended without a response ({ended[0].code})"
    if len(terminals) < prompts:
        return "fail", f"prompt {len(terminals) + 1} got no response in time"
    return "pass", f"{len(terminals)} prompts"


def _updates_for_known_sessions(events: Sequence[Any]) -> Verdict:
    from .events import Diagnostic

    unknown = [ev for ev in events if isinstance(ev, Diagnostic) and ev.code == "unknown_session"]
    if unknown:
        return "fail", f"{len(unknown)} session/update(s) for a session id the agent never opened"
    return "pass", ""


def _handshake(ev: Any) -> bool:
    from .events import RawEvent

    return isinstance(ev, RawEvent) and ev.name in ("initialize", "session/set_model")


async def _cancel_honoured(launch: Any, plugins: Any, parent_env: Mapping[str, str], turn_timeout: float) -> Verdict:
    """A prompt cancelled at its first update must be answered ``cancelled`` (the conversation waits 3 s)."""
    from ._conversation import open_conversation
    from .events import Diagnostic, ProcessExited, SessionStarted, TurnCompleted, TurnFailed, TurnStarted

    quiet = (TurnStarted, SessionStarted, Diagnostic, ProcessExited)
    terminal: Any = None
    sent = False
    async with open_conversation(launch, plugins=plugins, parent_env=parent_env) as conv:
        with trio.move_on_after(turn_timeout):
            async with trio.open_nursery() as nursery:
                async for ev in conv.send("Take your time: several steps, please."):
                    if isinstance(ev, (TurnCompleted, TurnFailed)):
                        terminal = ev
                    elif not sent and not isinstance(ev, quiet) and not _handshake(ev):
                        sent = True  # the prompt is in flight: the agent sent its first update for it
                        nursery.start_soon(conv.cancel_turn)
        if terminal is None:
            await conv.cancel_turn()
    if terminal is None:
        return "fail", f"the prompt did not end within {turn_timeout:g} s"
    if not sent:
        return "skip", f"the prompt ended ({getattr(terminal, 'code', 'end_turn')}) before any update to cancel at"
    result = terminal.raw.get("result") if isinstance(terminal.raw, dict) else None
    if isinstance(result, dict) and result.get("stopReason") == "cancelled":
        return "pass", ""
    if isinstance(terminal, TurnCompleted):
        return "skip", "answered end_turn: it ended before the cancel reached it, or it ignores session/cancel"
    if terminal.code == "turn_cancelled" and not _is_prompt_response(terminal):
        return "fail", "no response to the cancelled prompt within 3 s: the agent had to be stopped"
    return "fail", f"the cancelled prompt ended with {terminal.code}, not stopReason cancelled"


async def acp_clauses(
    events: Sequence[Any],
    terminals: Sequence[Sequence[Any]],
    prompts: int,
    *,
    launch: Any,
    plugins: Any,
    parent_env: Mapping[str, str],
    turn_timeout: float,
) -> dict[str, Verdict]:
    """Verdicts of :data:`ACP_CLAUSES` from the check's events (``terminals``: each prompt's terminal events)."""
    return {
        "acp_initialize_answered": _initialize_answered(events),
        "acp_one_response_per_prompt": _one_response_per_prompt(events, terminals, prompts),
        "acp_updates_for_known_sessions": _updates_for_known_sessions(events),
        "acp_cancel_honoured": await _cancel_honoured(launch, plugins, parent_env, turn_timeout),
    }
