"""Tool approval: ``allow`` / ``deny`` / ``ask`` rules turned into one :data:`~agentrt.permissions.PermissionPolicy`.

Every dialect asks the same policy: stream-json ``can_use_tool`` control
requests and ACP ``session/request_permission`` both reach the conversation as
a :class:`~agentrt.permissions.PermissionRequest`.

A rule is a tool-name pattern (``fnmatch``: ``Read``, ``mcp__fs__*``), optionally
with an argument pattern in parentheses: ``Bash(git status:*)`` matches a tool
whose command argument starts with the words ``git status``; ``Bash(ls)``
matches exactly ``ls``.  The command argument is the input's ``command``, else
``file_path``, ``path`` or ``url`` (the first that is a string), else an
``argv`` list joined by spaces.

Precedence, first match wins: command-line ``--deny-tool``, command-line
``--allow-tool``, config ``deny``, config ``allow``, an "always" answer given
in this thread, then the mode (command line, else config, else the command's
default).  So deny beats allow within one source, and the command line beats
the config file.  An *allow* rule with an argument pattern never matches a
command holding shell control characters (``; & | ` $( > <`` or a newline):
``Bash(git status:*)`` must not approve ``git status; rm -rf ~``.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
import orjson
import trio

from .permissions import PermissionDecision, PermissionRequest

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
#: Longest summary of a tool's input kept in a record or shown in a prompt.
SUMMARY_LIMIT = 200

_RULE_RE = re.compile(r"([A-Za-z0-9_.:*-]{1,128})(?:\(([^\x00-\x1f\x7f]{0,512})\))?")
_SHELL_CONTROL = re.compile(r"[;&|`<>\n\r]|\$\(")
_SECRETS = (
    # First: "Authorization: Bearer X" must mask X, not the word Bearer.
    re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})"),
    # key=value / "key": "value" where the key looks secret
    re.compile(r"(?i)((?:token|secret|passw(?:or)?d|api[_-]?key|auth|credential|cookie)[A-Za-z0-9_-]*"
               r"[\"']?\s*[:=]\s*[\"']?)(?!\*\*\*\*)([^\s\"'&,;]+)"),
    re.compile(r"()\b((?:sk|pk|rk)-[A-Za-z0-9_-]{8,}|xox[abpr]-[A-Za-z0-9-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}"
               r"|github_pat_[A-Za-z0-9_]{8,}|glpat-[A-Za-z0-9_-]{8,}|AKIA[A-Z0-9]{12,})"),
    re.compile(r"(?i)(https?://)([^/@\s:]+:[^/@\s]+)(?=@)"),
)


def mask_secrets(text: str) -> str:
    """``text`` with secret-looking values (``token=…``, bearer tokens, API keys, URL passwords) as ``****``."""
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: f"{m.group(1)}****", text)
    return text


def command_argument(tool_input: Mapping[str, Any]) -> str | None:
    """The argument an argument pattern is matched against.

    ``command``, ``file_path``, ``path`` or ``url`` (the first that is a
    string), else an ``argv`` list (the managed-task tool's) joined by spaces.
    """
    for key in ("command", "file_path", "path", "url"):
        value = tool_input.get(key)
        if isinstance(value, str):
            return value
    argv = tool_input.get("argv")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return " ".join(argv)
    return None


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def input_summary(tool_input: Mapping[str, Any], limit: int = SUMMARY_LIMIT) -> str:
    """A one-line, bounded, secret-masked summary of a tool's input (its command, else compact JSON)."""
    argument = command_argument(tool_input)
    if argument is None:
        try:
            argument = orjson.dumps(dict(tool_input), default=str).decode()
        except TypeError:
            argument = "{…}"
    # Mask before clipping, so a clip never leaves half a secret unmasked.
    return _clip(mask_secrets(argument), limit)


def tool_label(tool_name: str, tool_input: Mapping[str, Any], limit: int = 80) -> str:
    """How a tool use is named to a person: ``Bash(git status)``, ``Read(/etc/hosts)``, ``WebSearch``."""
    argument = command_argument(tool_input)
    name = _clip(tool_name, 64) or "tool"
    return name if argument is None else f"{name}({_clip(mask_secrets(argument), limit)})"


@attrs.frozen(kw_only=True)
class Rule:
    """One ``allow`` or ``deny`` pattern, parsed."""

    pattern: str
    tool: str
    argument: str | None = None
    prefix: bool = False
    """``True`` for ``Tool(words:*)``: the argument must start with ``words`` (as whole words)."""

    def matches(
        self, tool_name: str, tool_input: Mapping[str, Any], *, allowing: bool, aliases: Sequence[str] = ()
    ) -> bool:
        """Whether this rule covers the tool use (an allowing rule refuses compound commands).

        ``aliases`` are other names of the same tool use (an ACP tool call's ``kind``).
        """
        if not any(fnmatch.fnmatchcase(name, self.tool) for name in (tool_name, *aliases)):
            return False
        if self.argument is None:
            return True
        value = command_argument(tool_input)
        if value is None:
            return False
        value = value.strip()
        if allowing and _SHELL_CONTROL.search(value):
            return False
        if not self.prefix:
            return value == self.argument
        return value == self.argument or value.startswith(self.argument + " ") or self.argument == ""


def parse_rule(pattern: str) -> Rule:
    """``Read``, ``mcp__fs__*``, ``Bash(git status:*)``, ``Bash(ls)``; raises ``ValueError`` otherwise."""
    match = _RULE_RE.fullmatch(pattern.strip())
    if match is None:
        raise ValueError(f"{pattern[:80]!r} is not a tool pattern like Read or Bash(git status:*)")
    tool, argument = match.group(1), match.group(2)
    if argument is None:
        return Rule(pattern=pattern, tool=tool)
    prefix = argument.endswith(":*")
    if prefix:
        argument = argument[:-2]
    return Rule(pattern=pattern, tool=tool, argument=argument.strip(), prefix=prefix)


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

    @classmethod
    def build(
        cls,
        *,
        default_mode: Mode,
        cli_mode: str | None = None,
        cli_allow: Sequence[str] = (),
        cli_deny: Sequence[str] = (),
        config: Any = None,
    ) -> Ruleset:
        """From ``--permission-mode`` / ``--allow-tool`` / ``--deny-tool`` and a config ``Permissions``.

        Raises ``ValueError`` naming a bad pattern or mode.
        """
        modes = ("deny", "ask", "allow")
        if cli_mode is not None and cli_mode not in modes:
            raise ValueError(f"permission mode {cli_mode!r} is not one of deny, ask, allow")
        config_mode = getattr(config, "mode", None)
        mode, source = (cli_mode, "--permission-mode") if cli_mode is not None else (
            (config_mode, "config") if config_mode is not None else (default_mode, "default"))
        return cls(
            mode=mode,  # type: ignore[arg-type]
            mode_source=source,
            cli_allow=tuple(parse_rule(p) for p in cli_allow),
            cli_deny=tuple(parse_rule(p) for p in cli_deny),
            config_allow=tuple(parse_rule(p) for p in getattr(config, "allow", ()) or ()),
            config_deny=tuple(parse_rule(p) for p in getattr(config, "deny", ()) or ()),
        )

    def decide(self, tool_name: str, tool_input: Mapping[str, Any], aliases: Sequence[str] = ()) -> Verdict:
        """The first matching rule in precedence order, else the mode."""
        order: tuple[tuple[tuple[Rule, ...], Mode, str], ...] = (
            (self.cli_deny, "deny", "--deny-tool"),
            (self.cli_allow, "allow", "--allow-tool"),
            (self.config_deny, "deny", "config deny"),
            (self.config_allow, "allow", "config allow"),
        )
        for rules, action, source in order:
            for rule in rules:
                if rule.matches(tool_name, tool_input, allowing=action == "allow", aliases=aliases):
                    return Verdict(action=action, by=f"rule:{source} {rule.pattern}")
        return Verdict(action=self.mode, by=f"mode:{self.mode} ({self.mode_source})")


@attrs.frozen(kw_only=True)
class ApprovalPrompt:
    """What an asker shows a person."""

    tool_name: str
    label: str
    summary: str
    request_id: str
    timeout: float


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
        self._always: set[tuple[str, str | None]] = set()

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        """Decide, ask when the rules say so, record, and answer the agent."""
        tool_input: Mapping[str, Any] = request.input if isinstance(request.input, Mapping) else {}
        label = tool_label(request.tool_name, tool_input)
        verdict = self.rules.decide(request.tool_name, tool_input, _aliases(request))
        key = (request.tool_name, command_argument(tool_input))
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
        self, request: PermissionRequest, label: str, tool_input: Mapping[str, Any], key: tuple[str, str | None]
    ) -> tuple[Literal["allow", "deny"], str, str]:
        if self.asker is None:
            note = f"{label} denied: permission mode ask, but {self.no_asker_note}"
            self._notify(note)
            return "deny", "no_terminal", f"agentrt: {note}"
        prompt = ApprovalPrompt(
            tool_name=request.tool_name, label=label, summary=input_summary(tool_input),
            request_id=request.request_id, timeout=self.ask_timeout,
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
            conversation_id=self.conversation_id, thread=self.thread, tool=request.tool_name[:128],
            summary=input_summary(tool_input), decision=action, by=by, at=time.time(),
        )
        # Bounded and shielded from failure: the answer to the agent never waits on the database for long.
        with trio.move_on_after(10):
            try:
                await self.recorder(decision)
            except Exception as exc:
                self._notify(f"could not record the decision on {decision.tool}: {type(exc).__name__}")
