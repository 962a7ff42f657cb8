"""Telling a wrong protocol early: an agent that speaks another dialect than the one configured.

An agent launched under the wrong dialect used to hang the turn: Claude Code
started as awp-jsonl waits silently for its prompt, an ACP agent ignores a
``user`` line (claude-agent-acp says "Invalid message" on stderr and nothing
on stdout).  A :class:`ProtocolProbe` watches one process's output until the
first line the configured dialect recognises; until then:

* a line of another known dialect (JSON-RPC for ACP; Claude Code's
  ``system/init`` or a ``stream_event``/``control_request`` line for
  stream-json; awp-jsonl/stream-json lines under ACP) fails the turn with
  ``protocol_mismatch``, naming the dialect it looks like and the setting to
  change;
* no recognised line within the first-output bound after the prompt, while
  the process lives, fails it the same way (:data:`FIRST_OUTPUT_TIMEOUT`, or
  ``AGENTRT_FIRST_OUTPUT_TIMEOUT``).

The probe is synchronous and I/O-free; :class:`FirstOutputWatch` wraps it
for the engine (:class:`agentrt._engine.HostedProcess`), which feeds it and
stops the process on a mismatch (the next turn would only fail again).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from ._os import child_watch
from .events import (
    ControlRequest,
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
)

__all__ = [
    "FIRST_OUTPUT_TIMEOUT",
    "PROTOCOL_MISMATCH",
    "FirstOutputWatch",
    "ProtocolProbe",
    "first_output_timeout",
    "looks_like",
]

PROTOCOL_MISMATCH = "protocol_mismatch"

FIRST_OUTPUT_TIMEOUT = 30.0
"""How long after the prompt a new process has to write one line its dialect recognises."""

_ENV = "AGENTRT_FIRST_OUTPUT_TIMEOUT"

# Fields only Claude Code's system/init carries (the awp-jsonl contract's init has session_id and model).
_CLAUDE_INIT = frozenset({"claude_code_version", "apiKeySource", "permissionMode", "slash_commands", "output_style"})
# Line types of the Claude-Code family (awp-jsonl and stream-json share most of them).
_CLAUDE_TYPES = frozenset({
    "system", "assistant", "user", "result", "content_block_start", "content_block_delta", "content_block_stop",
    "message_start", "message_delta", "message_stop", "rate_limit_event",
})
_STREAM_JSON_ONLY = frozenset({"stream_event", "control_request", "control_response"})
# What counts as the dialect understanding a line.
_RECOGNISED = (TextDelta, ThinkingDelta, ToolUse, ToolResult, TurnCompleted, TurnFailed, ControlRequest, Status)


def first_output_timeout(env: Mapping[str, str]) -> float | None:
    """The first-output bound ``env`` asks for (``AGENTRT_FIRST_OUTPUT_TIMEOUT``; ``0``: none), else the default.

    Raises ``invalid_first_output_timeout`` for a value that is not a number of seconds.
    """
    raw = env.get(_ENV, "").strip()
    if not raw:
        return FIRST_OUTPUT_TIMEOUT
    from .errors import AgentrtError

    try:
        value = float(raw)
    except ValueError:
        raise AgentrtError("invalid_first_output_timeout", f"{_ENV} must be a number of seconds") from None
    if value != value or value < 0 or value == float("inf"):
        raise AgentrtError("invalid_first_output_timeout", f"{_ENV} must be a number of seconds, 0 for none")
    return value or None


def looks_like(obj: Any, configured: str) -> tuple[str, str] | None:
    """``(dialect, what)`` when the parsed line ``obj`` belongs to a known dialect other than ``configured``."""
    if not isinstance(obj, dict):
        return None
    if obj.get("jsonrpc") == "2.0":
        return None if configured == "acp" else ("acp", "JSON-RPC messages")
    kind = obj.get("type")
    claude_init = kind == "system" and obj.get("subtype") == "init" and not _CLAUDE_INIT.isdisjoint(obj)
    if configured == "awp-jsonl":
        if claude_init:
            return "stream-json", "Claude Code's system/init line"
        if kind in _STREAM_JSON_ONLY:
            return "stream-json", f"a {kind} line"
    elif configured == "acp":
        if claude_init or kind in _STREAM_JSON_ONLY:
            return "stream-json", "Claude Code's system/init line" if claude_init else f"a {kind} line"
        if kind in _CLAUDE_TYPES:
            return "awp-jsonl", f"a {kind} line"
    return None


def _setting(dialect: str) -> str:
    return (f"set the agent's protocol to {dialect} (--protocol {dialect}, protocol = \"{dialect}\" in its "
            f"config entry, or AWP_AGENT_CLI_PROTOCOL={dialect})")


def _guess(executable: str) -> str | None:
    # Only for silence, where no line says anything: the usual names of real agents.
    name = os.path.basename(executable).lower()
    if name.startswith("claude") and "acp" not in name:
        return "stream-json"
    if "acp" in name or name.startswith("gemini"):
        return "acp"
    return None


class ProtocolProbe:
    """Watches one process's output until its dialect recognises a line (see the module docstring)."""

    def __init__(self, protocol: str, executable: str, bound: float | None) -> None:
        self.protocol = protocol
        self.executable = executable
        #: Seconds after the prompt for a recognised line (None: no bound).
        self.bound = bound
        #: True until the dialect recognised a line of this process, or a mismatch was reported.
        self.armed = True

    def look(self, events: Sequence[Event]) -> tuple[int, TurnFailed] | None:
        """Where ``events`` show another dialect (the index of that event) and the ``protocol_mismatch`` failure.

        Disarms once the dialect recognised an event, or at the mismatch.
        """
        for n, ev in enumerate(events):
            kind = type(ev)
            if kind is SessionStarted or kind is RawEvent or kind is Diagnostic:
                raw = ev.raw
                found = looks_like(raw, self.protocol) if raw is not None else None
                if found is not None:
                    self.armed = False
                    dialect, what = found
                    return n, TurnFailed(
                        code=PROTOCOL_MISMATCH,
                        message=f"the agent's output looks like {dialect} ({what}), not {self.protocol}: "
                        + _setting(dialect),
                    )
                if kind is not Diagnostic:
                    # The dialect made an event of its own of the line (an ACP handshake response, say).
                    self.armed = False
                    return None
            elif isinstance(ev, _RECOGNISED):
                self.armed = False
                return None
        return None

    def silent(self) -> TurnFailed:
        """The failure for a process that wrote nothing its dialect recognises within :attr:`bound`."""
        self.armed = False
        guess = _guess(self.executable)
        if guess is not None and guess != self.protocol:
            hint = f"; by its name it may speak {guess}: {_setting(guess)}"
        else:
            hint = "; check the agent's protocol (--protocol, protocol in its config entry, or AWP_AGENT_CLI_PROTOCOL)"
        return TurnFailed(
            code=PROTOCOL_MISMATCH,
            message=f"the agent wrote nothing {self.protocol} recognises within {self.bound:g} s of the prompt"
            f"{hint}; an agent that is only slow to start can be given longer with the config key "
            f"agents.<name>.first_output_timeout or, for one command, {_ENV}",
        )


class FirstOutputWatch:
    """One process's :class:`ProtocolProbe` and the bound on its first recognised line.

    The engine (:class:`agentrt._engine.HostedProcess`) feeds it each chunk's
    events while the output is a turn's answer (:meth:`look`), and arms the
    bound after the first prompt (:meth:`arm`).  The bound is a timer of the
    run's one watcher where there is one (no task waits while the output is
    fine), else a task.  When it runs out while the prompt still waits,
    ``arm``'s ``on_silent`` gets the ``protocol_mismatch`` failure (it ends
    the turn and stops the process).
    """

    __slots__ = ("_nursery", "_recognised", "probe")

    def __init__(self, probe: ProtocolProbe, *, nursery: trio.Nursery) -> None:
        self.probe = probe
        self._nursery = nursery
        self._recognised: trio.Event | None = None  # made when armed: set once the probe disarms

    def look(self, events: list[Event]) -> tuple[list[Event], bool]:
        """``events`` with the ``protocol_mismatch`` failure after the first foreign line, and whether there was one."""
        found = self.probe.look(events)
        if not self.probe.armed and self._recognised is not None:
            self._recognised.set()
        if found is None:
            return events, False
        at, failure = found
        return [*events[: at + 1], failure, *events[at + 1 :]], True

    def arm(self, waiting: Callable[[], bool], on_silent: Callable[[TurnFailed], Awaitable[None]]) -> None:
        """After the first prompt: call ``on_silent`` if ``waiting()`` still holds :attr:`ProtocolProbe.bound` later.

        ``waiting`` says whether the prompt still waits on this process (its turn
        live, the process not exited); only the first call per process arms.
        """
        probe = self.probe
        if not probe.armed or probe.bound is None or self._recognised is not None:
            return
        self._recognised = recognised = trio.Event()
        if not child_watch.AVAILABLE:
            self._nursery.start_soon(self._bound_task, waiting, recognised, on_silent)
            return

        def due() -> None:
            if probe.armed and waiting():
                self._nursery.start_soon(self._silent, waiting, on_silent)

        child_watch.current_watcher().call_later(probe.bound, due)

    async def _bound_task(
        self, waiting: Callable[[], bool], recognised: trio.Event, on_silent: Callable[[TurnFailed], Awaitable[None]]
    ) -> None:
        assert self.probe.bound is not None
        with trio.move_on_after(self.probe.bound):
            await recognised.wait()
        await self._silent(waiting, on_silent)

    async def _silent(self, waiting: Callable[[], bool], on_silent: Callable[[TurnFailed], Awaitable[None]]) -> None:
        if self.probe.armed and waiting():  # not recognised (nor ended) in the meantime
            await on_silent(self.probe.silent())
