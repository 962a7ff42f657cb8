"""Tool approval: ``allow`` / ``deny`` / ``ask`` rules turned into one :data:`~agentrt.permissions.PermissionPolicy`.

Every dialect asks the same policy: stream-json ``can_use_tool`` control
requests and ACP ``session/request_permission`` both reach the conversation as
a :class:`~agentrt.permissions.PermissionRequest`.

A rule is a tool-name pattern (``fnmatch``, case-sensitive: ``Read``,
``mcp__fs__*``), optionally with an argument pattern in parentheses; what it
matches is :mod:`agentrt._approval_rules`'s (allow rules are allowlists: a
shell command must be provably one plain command; deny rules see every simple
command of a compound one).  What a person is shown is
:mod:`agentrt._approval_show`'s.

Precedence, first match wins: command-line ``--deny-tool``, command-line
``--allow-tool``, config ``deny``, config ``allow``, an "always" answer given
in this thread, then the mode (command line, else config, else the command's
default).  So deny beats allow within one source, and the command line beats
the config file.  A deny rule that cannot rule a command out (it does not
parse, its program is computed) asks instead of letting an allow rule or the
mode allow it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs
import trio

from ._approval_rules import Rule, case_warnings, command_argument, parse_rule
from ._approval_show import always_key, always_scope, input_fields, input_summary, plain_name, tool_label, tool_name
from .display import SHOW_LIMIT, escape_text, wrap_lines
from .masking import mask_secrets
from .permissions import PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from ._config import Permissions

__all__ = [
    "ASK_TIMEOUT",
    "Answer",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalPrompt",
    "Rule",
    "Ruleset",
    "Verdict",
    "command_argument",
    "input_summary",
    "mask_secrets",
    "parse_rule",
    "tool_label",
]

Answer = Literal["allow", "deny", "always"]
Mode = Literal["deny", "ask", "allow"]

#: Default seconds an ``ask`` waits for a person before it denies.  The
#: conversation denies by itself after 60 s, so an ask must end before that.
ASK_TIMEOUT = 50.0


@attrs.frozen(kw_only=True)
class Verdict:
    """What the rules say about one tool use: ``allow``, ``deny`` or ``ask``, and why."""

    action: Mode
    by: str
    """``rule:--deny-tool Bash(rm:*)``, ``rule:config allow Read``, ``mode:deny (default)``, ``always``."""


@attrs.frozen(kw_only=True)
class Ruleset:
    """Rules from the command line and the config file, and the mode; :meth:`decide` is pure."""

    mode: Mode = "deny"
    mode_source: str = "default"
    """Where the mode came from: ``--permission-mode``, ``config`` or ``default``."""
    cli_allow: tuple[Rule, ...] = ()
    cli_deny: tuple[Rule, ...] = ()
    config_allow: tuple[Rule, ...] = ()
    config_deny: tuple[Rule, ...] = ()
    warnings: tuple[str, ...] = ()
    """``tool_pattern_case`` warnings: rules whose tool name differs from a known tool's only in case."""

    @classmethod
    def build(
        cls,
        *,
        default_mode: Mode,
        cli_mode: str | None = None,
        cli_allow: Sequence[str] = (),
        cli_deny: Sequence[str] = (),
        config: Permissions | None = None,
    ) -> Ruleset:
        """From ``--permission-mode`` / ``--allow-tool`` / ``--deny-tool`` and a config ``Permissions``.

        Raises ``ValueError`` naming a bad pattern or mode.
        """
        modes = ("deny", "ask", "allow")
        if cli_mode is not None and cli_mode not in modes:
            raise ValueError(f"permission mode {cli_mode!r} is not one of deny, ask, allow")
        config_mode = config.mode if config is not None else None
        mode, source = (cli_mode, "--permission-mode") if cli_mode is not None else (
            (config_mode, "config") if config_mode is not None else (default_mode, "default"))
        config_allow = tuple(config.allow) if config is not None else ()
        config_deny = tuple(config.deny) if config is not None else ()
        return cls(
            mode=cast(Mode, mode),  # cli_mode checked above; a config's mode as its schema gave it
            mode_source=source,
            cli_allow=tuple(parse_rule(p) for p in cli_allow),
            cli_deny=tuple(parse_rule(p) for p in cli_deny),
            config_allow=tuple(parse_rule(p) for p in config_allow),
            config_deny=tuple(parse_rule(p) for p in config_deny),
            warnings=tuple(case_warnings([*cli_deny, *cli_allow, *config_deny, *config_allow])),
        )

    def decide(self, tool_name: str, tool_input: Mapping[str, Any], aliases: Sequence[str] = ()) -> Verdict:
        """The first matching rule in precedence order, else the mode.

        A deny rule that is unsure (``maybe``) does not decide, but no later
        allow rule may allow then: the verdict is ``ask`` (``deny`` in mode deny).
        """
        order: tuple[tuple[tuple[Rule, ...], Mode, str], ...] = (
            (self.cli_deny, "deny", "--deny-tool"),
            (self.cli_allow, "allow", "--allow-tool"),
            (self.config_deny, "deny", "config deny"),
            (self.config_allow, "allow", "config allow"),
        )
        unsure: str | None = None
        for rules, action, source in order:
            for rule in rules:
                found = rule.match(tool_name, tool_input, allowing=action == "allow", aliases=aliases)
                if found == "yes" and (action == "deny" or unsure is None):
                    return Verdict(action=action, by=f"rule:{source} {rule.pattern}")
                if found == "maybe" and unsure is None:
                    unsure = f"rule:{source} {rule.pattern} (unsure)"
        if unsure is not None:
            return Verdict(action="deny" if self.mode == "deny" else "ask", by=unsure)
        return Verdict(action=self.mode, by=f"mode:{self.mode} ({self.mode_source})")


@attrs.frozen(kw_only=True)
class ApprovalPrompt:
    """What an asker shows a person."""

    tool_name: str
    label: str
    """One line for notes (``Bash(git st…)``): escaped, masked, maybe cut; never the question itself."""
    summary: str
    """The whole input, escaped and masked: the argument, then ``key: value`` lines (``\\n`` ends a line)."""
    request_id: str
    timeout: float
    name: str = ""
    """The tool's name as shown (escaped; ``tool`` when empty)."""
    always: str = ""
    """What an "always" answer covers: ``Bash with exactly this command``."""
    fields: tuple[str, ...] = ()
    """The whole input, masked but not escaped: the argument, then ``key: value``; :meth:`lines` shows them."""

    def lines(self, width: int) -> list[str]:
        """The whole input, escaped, in lines at most ``width`` columns wide (none for an empty input)."""
        return [line for field in self.fields for line in wrap_lines(field, width)]


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """One recorded decision (what ``agentrt logs --approvals`` lists)."""

    conversation_id: str | None
    thread: str | None
    tool: str
    summary: str
    decision: Literal["allow", "deny"]
    by: str
    """``rule:…``, ``mode:…``, ``user``, ``user:always``, ``always``, ``timeout``, ``no_terminal``."""
    at: float


def _aliases(request: PermissionRequest) -> tuple[str, ...]:
    """An ACP permission request's tool ``kind`` (``read``, ``edit``, ``execute``, …): rules may name it."""
    raw = request.raw
    params = raw.get("params") if isinstance(raw, Mapping) else None
    call = params.get("toolCall") if isinstance(params, Mapping) else None
    kind = call.get("kind") if isinstance(call, Mapping) else None
    return (kind,) if isinstance(kind, str) and kind and kind != request.tool_name else ()


Asker = Callable[[ApprovalPrompt], Awaitable[Answer]]
Recorder = Callable[[ApprovalDecision], Awaitable[None]]


class ApprovalPolicy:
    """A :data:`~agentrt.permissions.PermissionPolicy` from a :class:`Ruleset`, an asker and a recorder.

    ``asker`` answers ``ask`` verdicts (``allow``, ``deny`` or ``always``: allow
    this tool use, with the same argument, for the rest of the thread); without
    one, ``ask`` denies with ``no_asker_note``.  An asker that does not answer
    within ``ask_timeout`` seconds (or fails) denies, saying so.  ``recorder``
    gets every decision; its failure never changes the decision.
    """

    def __init__(
        self,
        rules: Ruleset,
        *,
        asker: Asker | None = None,
        recorder: Recorder | None = None,
        ask_timeout: float = ASK_TIMEOUT,
        conversation_id: str | None = None,
        thread: str | None = None,
        no_asker_note: str = "no terminal to ask on",
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.rules = rules
        self.asker = asker
        self.recorder = recorder
        self.ask_timeout = ask_timeout
        self.conversation_id = conversation_id
        self.thread = thread
        self.no_asker_note = no_asker_note
        #: Called with a one-line note when an ask could not be answered (timeout, no terminal).
        self.notify = notify
        self._always: set[tuple[str, str]] = set()

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        """Decide, ask when the rules say so, record, and answer the agent."""
        tool_input: Mapping[str, Any] = request.input if isinstance(request.input, Mapping) else {}
        label = tool_label(request.tool_name, tool_input)
        verdict = self.rules.decide(request.tool_name, tool_input, _aliases(request))
        key = always_key(request.tool_name, tool_input)
        action: Literal["allow", "deny"]
        message = ""
        if verdict.action == "ask" and key in self._always:
            action, by = "allow", "always"
        elif verdict.action != "ask":
            action, by = verdict.action, verdict.by
            if action == "deny":
                message = f"agentrt: {label} denied ({by})"
        else:
            action, by, message = await self._ask(request, label, tool_input, key)
        await self._record(request, tool_input, action, by)
        return PermissionDecision(allow=action == "allow", message=message)

    async def _ask(
        self, request: PermissionRequest, label: str, tool_input: Mapping[str, Any], key: tuple[str, str]
    ) -> tuple[Literal["allow", "deny"], str, str]:
        if self.asker is None:
            note = f"{label} denied: permission mode ask, but {self.no_asker_note}"
            self._notify(note)
            return "deny", "no_terminal", f"agentrt: {note}"
        fields = input_fields(tool_input)
        if not plain_name(request.tool_name):  # shown whole, escaped, first
            fields = (f"tool: {request.tool_name}", *fields)
        size = sum(len(escape_text(field)) for field in fields)
        if size > SHOW_LIMIT:
            note = (f"{label} denied: its input is {size} characters, more than the {SHOW_LIMIT} a question "
                    "shows whole")
            self._notify(note)
            return "deny", "too_long", f"agentrt: {note}"
        prompt = ApprovalPrompt(
            tool_name=request.tool_name, label=label,
            summary="\n".join(line for field in fields for line in wrap_lines(field, SHOW_LIMIT)),
            request_id=request.request_id, timeout=self.ask_timeout, name=tool_name(request.tool_name),
            always=always_scope(request.tool_name, tool_input), fields=fields,
        )
        answer: Answer | None = None
        with trio.move_on_after(self.ask_timeout):
            try:
                answer = await self.asker(prompt)
            except Exception as exc:  # an asker bug denies; it never allows
                note = f"{label} denied: asking failed ({type(exc).__name__})"
                self._notify(note)
                return "deny", "ask_failed", f"agentrt: {note}"
        if answer is None:
            note = f"{label} denied: no answer within {self.ask_timeout:g}s"
            self._notify(note)
            return "deny", "timeout", f"agentrt: {note}"
        if answer == "always":
            self._always.add(key)
            return "allow", "user:always", ""
        if answer == "allow":
            return "allow", "user", ""
        return "deny", "user", f"agentrt: {label} denied by the user"

    def _notify(self, note: str) -> None:
        if self.notify is not None:
            self.notify(note)

    async def _record(
        self, request: PermissionRequest, tool_input: Mapping[str, Any], action: Literal["allow", "deny"], by: str
    ) -> None:
        if self.recorder is None:
            return
        decision = ApprovalDecision(
            conversation_id=self.conversation_id, thread=self.thread, tool=escape_text(request.tool_name[:128]),
            summary=input_summary(tool_input), decision=action, by=by, at=time.time(),
        )
        # Bounded and shielded from failure: the answer to the agent never waits on the database for long.
        with trio.move_on_after(10):
            try:
                await self.recorder(decision)
            except Exception as exc:
                self._notify(f"could not record the decision on {decision.tool}: {type(exc).__name__}")
