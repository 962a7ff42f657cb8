"""The conformance check an agent-CLI author runs before shipping (``agentrt check``).

It launches the CLI the launch contract names, holds a short scripted
conversation, and reports clause by clause of the AWP agent CLI protocol.
Every wait is bounded; a CLI that hangs fails the clause it hangs in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import trio

from .errors import AgentrtError

__all__ = ["Clause", "CLAUSES", "run_check"]


@attrs.frozen(kw_only=True)
class Clause:
    """One line of the report: a contract clause and what was observed."""

    id: str
    title: str
    status: str  # "pass" | "fail" | "skip" (the agent gave no occasion to judge)
    detail: str = ""


#: The clauses checked, in report order: (id, title).
CLAUSES: tuple[tuple[str, str], ...] = (
    ("no_output_before_input", "no output before the first input line"),
    ("init_after_first_input", "system/init (session id) after the first input"),
    ("one_terminal_per_turn", "exactly one terminal event per accepted turn"),
    ("protocol_only_stdout", "stdout is protocol-only (every line is a JSON object)"),
    ("session_id_shape", "session id matches [A-Za-z0-9._:-]{1,256}"),
    ("resume_honoured", "--resume <id> continues the same session"),
    ("clean_exit_on_shutdown", "clean exit on the shutdown line (or stdin close where the dialect has none)"),
    ("clean_exit_on_stdin_close", "clean exit when stdin is closed"),
)


class _Recorder:
    name = "check-recorder"
    policy: Literal["block", "coalesce"] = "block"
    buffer_size = 256

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._changed = trio.Event()

    async def handle(self, batch: Any) -> None:
        self.events.extend(batch.events)
        self._changed.set()
        self._changed = trio.Event()

    async def aclose(self) -> None:
        pass

    async def wait_until(self, predicate: Callable[[Any], bool]) -> Any:
        while True:
            for ev in self.events:
                if predicate(ev):
                    return ev
            await self._changed.wait()

    def diagnostics(self, code: str) -> list[Any]:
        from .events import Diagnostic

        return [ev for ev in self.events if isinstance(ev, Diagnostic) and ev.code == code]


async def run_check(
    launch: Any,
    *,
    plugins: Any,
    parent_env: Mapping[str, str],
    prompts: tuple[str, str] = ("Reply with one short sentence.", "Reply with one more short sentence."),
    turn_timeout: float = 120.0,
    quiet_period: float = 0.5,
    exit_timeout: float = 5.0,
) -> list[Clause]:
    """Run the scripted conversation; return one :class:`Clause` per entry of :data:`CLAUSES`.

    For ``acp`` the clauses of :data:`~agentrt._check_acp.ACP_CLAUSES` follow, and
    ``resume_honoured`` is skipped when the agent does not advertise ``loadSession``.
    """
    from ._check_acp import ACP_CLAUSES, acp_clauses, advertises_load_session
    from ._conversation import open_conversation
    from ._launch import is_valid_session_id
    from .events import ProcessExited, TurnCompleted, TurnFailed, TurnStarted

    results: dict[str, tuple[bool, str]] = {}
    rec = _Recorder()
    session_id: str | None = None
    terminals: list[int] = []
    ended: list[list[Any]] = []  # each prompt's terminal events
    skipped: dict[str, str] = {}
    started_before_input = False

    def exited_cleanly(ev: Any) -> tuple[bool, str]:
        if ev is None:
            return False, f"did not exit within {exit_timeout:g} s"
        ok = ev.returncode == 0 and ev.signal is None
        how = f"signal {ev.signal}" if ev.signal is not None else f"exit code {ev.returncode}"
        return ok, f"exited with {how}"

    # Part 1: two turns, then the graceful stop.
    async with open_conversation(
        launch, plugins=plugins, parent_env=parent_env, sinks=[rec], term_grace=exit_timeout
    ) as conv:
        with trio.move_on_after(quiet_period):
            await rec.wait_until(lambda ev: not isinstance(ev, (TurnStarted, ProcessExited)))
        early = rec.diagnostics("output_before_input")
        results["no_output_before_input"] = (
            (False, f"{len(early)} event(s) before any input") if early else (True, "")
        )
        started_before_input = bool(early)
        for prompt in prompts:
            count = 0
            with trio.move_on_after(turn_timeout) as scope:
                async for ev in conv.send(prompt):
                    if isinstance(ev, (TurnCompleted, TurnFailed)):
                        count += 1
                        if count == 1:
                            ended.append([])
                        ended[-1].append(ev)
            if scope.cancelled_caught:
                await conv.cancel_turn()
                count = -1
            terminals.append(count)
            if count != 1:
                break
        session_id = conv.session_id
        # A late duplicate terminal event would show up as a diagnostic shortly after.
        with trio.move_on_after(quiet_period):
            await rec.wait_until(lambda ev: False)
        await conv.stop()
        exit_event = next((ev for ev in reversed(rec.events) if isinstance(ev, ProcessExited)), None)
        shutdown_ok, shutdown_detail = exited_cleanly(exit_event)

    if session_id is not None and not started_before_input:
        results["init_after_first_input"] = (True, f"session {session_id}")
    elif started_before_input:
        results["init_after_first_input"] = (False, "the CLI spoke before its first input")
    else:
        results["init_after_first_input"] = (False, "no system/init with a session id")
    dupes = rec.diagnostics("duplicate_terminal_event")
    if all(n == 1 for n in terminals) and len(terminals) == len(prompts) and not dupes:
        results["one_terminal_per_turn"] = (True, f"{len(terminals)} turns")
    else:
        shown = ["timeout" if n < 0 else str(n) for n in terminals]
        results["one_terminal_per_turn"] = (
            False,
            f"terminal events per turn: {', '.join(shown)}; duplicates: {len(dupes)}",
        )
    malformed = rec.diagnostics("malformed_output_line")
    results["protocol_only_stdout"] = (
        (False, f"{len(malformed)} malformed line(s), first: {malformed[0].detail[:80]}") if malformed else (True, "")
    )
    bad_ids = rec.diagnostics("invalid_session_id")
    if bad_ids:
        results["session_id_shape"] = (False, "the CLI reported a session id of the wrong shape")
    elif session_id is None:
        results["session_id_shape"] = (False, "no session id reported")
    else:
        results["session_id_shape"] = (is_valid_session_id(session_id), session_id)
    results["clean_exit_on_shutdown"] = (shutdown_ok, shutdown_detail)

    # Part 2: resume the session in a new process.
    acp = launch.protocol == "acp"
    if acp and not advertises_load_session(rec.events):
        skipped["resume_honoured"] = "the agent does not advertise loadSession"
    elif session_id is None:
        results["resume_honoured"] = (False, "no session id to resume")
    else:
        rec2 = _Recorder()
        try:
            async with open_conversation(
                launch, plugins=plugins, parent_env=parent_env, sinks=[rec2], resume=session_id,
                term_grace=exit_timeout,
            ) as conv2:
                terminal = None
                with trio.move_on_after(turn_timeout):
                    terminal = await conv2.ask(prompts[0])
                resumed = conv2.session_id
            if terminal is None:
                results["resume_honoured"] = (False, "the resumed turn did not end in time")
            elif not isinstance(terminal, TurnCompleted):
                results["resume_honoured"] = (False, f"the resumed turn failed: {terminal.code}")
            elif resumed != session_id:
                results["resume_honoured"] = (False, f"resumed as {resumed!r}, not {session_id!r}")
            else:
                results["resume_honoured"] = (True, session_id)
        except AgentrtError as exc:
            results["resume_honoured"] = (False, exc.code)

    # Part 3: closing stdin (no shutdown line) must end the CLI by itself.
    rec3 = _Recorder()
    async with open_conversation(
        launch, plugins=plugins, parent_env=parent_env, sinks=[rec3], term_grace=exit_timeout
    ) as conv3:
        proc = conv3.process
        assert proc is not None
        await proc.close_stdin()
        with trio.move_on_after(exit_timeout):
            await rec3.wait_until(lambda ev: isinstance(ev, ProcessExited))
        ev3 = next((ev for ev in rec3.events if isinstance(ev, ProcessExited)), None)
        ok3, detail3 = exited_cleanly(ev3)
        if ev3 is not None and ev3.requested:
            ok3, detail3 = False, f"had to be stopped ({detail3})"
        results["clean_exit_on_stdin_close"] = (ok3, detail3)

    clauses = [
        Clause(id=cid, title=title, status="skip", detail=skipped[cid])
        if cid in skipped
        else Clause(id=cid, title=title, status="pass" if results[cid][0] else "fail", detail=results[cid][1])
        for cid, title in CLAUSES
    ]
    if acp:
        verdicts = await acp_clauses(
            rec.events,
            ended,
            len(prompts),
            launch=launch,
            plugins=plugins,
            parent_env=parent_env,
            turn_timeout=turn_timeout,
        )
        clauses.extend(
            Clause(id=cid, title=title, status=verdicts[cid][0], detail=verdicts[cid][1]) for cid, title in ACP_CLAUSES
        )
    return clauses
