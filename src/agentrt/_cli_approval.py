"""The tool-approval options shared by ``run``, ``chat`` and ``web``, and the policy they build.

``--allow-tool PATTERN`` / ``--deny-tool PATTERN`` (repeatable),
``--permission-mode deny|ask|allow`` and ``--ask-timeout SECONDS``; the rules
themselves are :mod:`agentrt._approval`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from ._approval import ASK_TIMEOUT, ApprovalPolicy, Asker, Mode, Recorder, Ruleset
from .errors import AgentrtError

__all__ = ["approval_options", "build_approval_policy", "close_recorder", "store_recorder"]

F = TypeVar("F", bound=Callable[..., Any])
# Each warning once per process: ``agentrt web`` builds a policy per thread.
_WARNED: set[str] = set()


def _warn(text: str) -> None:
    if text not in _WARNED:
        _WARNED.add(text)
        click.echo(f"agentrt: warning: tool_pattern_case: {text}", err=True)


def approval_options(func: F) -> F:
    """Add ``--allow-tool``, ``--deny-tool``, ``--permission-mode`` and ``--ask-timeout`` to a command."""
    options = (
        click.option("--allow-tool", "allow_tools", multiple=True, metavar="PATTERN",
                     help="Allow tools matching PATTERN, e.g. Read or 'Bash(git status:*)' (repeatable)."),
        click.option("--deny-tool", "deny_tools", multiple=True, metavar="PATTERN",
                     help="Deny tools matching PATTERN; beats --allow-tool (repeatable)."),
        click.option("--permission-mode", type=click.Choice(["deny", "ask", "allow"]), default=None,
                     help="What a tool no rule matches gets (default: config, else deny for run, ask for "
                          "chat and web)."),
        click.option("--ask-timeout", type=click.FloatRange(1, 55), default=ASK_TIMEOUT, show_default=True,
                     metavar="SECONDS", help="How long an ask waits for an answer before it denies."),
    )
    for option in reversed(options):
        func = option(func)
    return func


def build_approval_policy(
    *,
    default_mode: Mode,
    permission_mode: str | None,
    allow_tools: Sequence[str],
    deny_tools: Sequence[str],
    config: Any,
    asker: Asker | None = None,
    recorder: Recorder | None = None,
    ask_timeout: float = ASK_TIMEOUT,
    conversation_id: str | None = None,
    thread: str | None = None,
    notify: Callable[[str], None] | None = None,
    no_asker_note: str = "no terminal to ask on",
    warn: Callable[[str], None] = _warn,
) -> ApprovalPolicy:
    """The policy for one conversation; a bad pattern raises ``invalid_tool_pattern``.

    A rule whose tool name differs from a known tool's only in case (``bash``)
    is kept (tool names are exact) and reported to ``warn`` (by default
    ``agentrt: warning: tool_pattern_case: …`` on stderr, once per process).
    """
    try:
        rules = Ruleset.build(default_mode=default_mode, cli_mode=permission_mode, cli_allow=allow_tools,
                              cli_deny=deny_tools, config=config)
    except ValueError as exc:
        raise AgentrtError("invalid_tool_pattern", str(exc)) from None
    for text in rules.warnings:
        warn(text)
    return ApprovalPolicy(rules, asker=asker, recorder=recorder, ask_timeout=ask_timeout,
                          conversation_id=conversation_id, thread=thread, notify=notify,
                          no_asker_note=no_asker_note)


def store_recorder(plugins: Any, env: Mapping[str, str]) -> Recorder | None:
    """A recorder writing decisions to the thread store's database, when it can (agentrt-sqlite)."""
    store = plugins.thread_store(env)
    from .threads import ApprovalLog

    return store.record_approval if isinstance(store, ApprovalLog) else None


async def close_recorder(policy: ApprovalPolicy) -> None:
    """Close the database connection a :func:`store_recorder` opened (bounded; idempotent)."""
    import types

    import trio

    from .threads import AsyncClosable

    recorder = policy.recorder  # a store's bound record_approval: close its store
    if isinstance(recorder, types.MethodType) and isinstance(recorder.__self__, AsyncClosable):
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await recorder.__self__.aclose()
