"""One approval rule and what it matches: allow rules are allowlists, deny rules see every command.

A rule is a tool-name pattern (``fnmatch``, case-sensitive) with an optional
argument pattern: ``Bash(git status:*)`` (these words, then anything),
``Bash(ls)`` (exactly this), ``Read(/dir:*)`` (``/dir`` or anything under it).

The argument is the tool input's ``command`` (a shell command; a list is an
argv), else ``file_path`` or ``path`` (a path), else ``url``, else ``argv``
(a list of words run without a shell).  How it is compared depends on which
kind of rule asks:

* **allow**: a shell command must be provably one simple command of plain
  words (:func:`agentrt._shellwords.plain_command`) whose words start with (or
  are) the rule's words; a path must be absolute and, normalised, be (or lie
  under) the rule's path; anything unprintable never matches.
* **deny**: every simple command of a shell command is checked, after
  assignments, quotes and wrappers (``env``, ``sudo``, ``command``, ``exec``,
  ``nice``, ``timeout``, …) are stripped and with the program's basename
  (``/bin/rm`` is ``rm``); ``sh -c 'SCRIPT'`` and ``eval`` are looked into.  A
  match is ``"yes"``; ``"maybe"`` when the rule cannot rule the command out
  (a parse error, a program name that is an expansion, a shell reading a
  script or stdin, the rule's program named inside the arguments of a program
  that runs others such as ``xargs``, ``find`` or ``python``).  Paths are
  normalised and compared case-insensitively; a relative path matches when
  some working directory would make it match.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs

from ._shellwords import Pattern, plain_command, printable, simple_commands

__all__ = [
    "KNOWN_TOOLS", "Match", "Rule", "argument_field", "case_warnings", "command_argument", "parse_rule",
    "tool_argument",
]

Match = Literal["yes", "maybe", "no"]
Kind = Literal["command", "path", "url", "argv"]

#: Tool names and ACP kinds a rule's name is checked against for case slips (``bash`` for ``Bash``).
KNOWN_TOOLS = (
    "Bash", "BashOutput", "KillShell", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep",
    "LS", "WebFetch", "WebSearch", "Task", "TodoWrite", "ExitPlanMode", "SlashCommand", "awp_run_managed_task",
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other",
)

_RULE_RE = re.compile(r"([A-Za-z0-9_.:*-]{1,128})(?:\(([^\x00-\x1f\x7f]{0,512})\))?")
# Programs that run the rest of their words as a command (stripped before a deny rule compares).
_WRAPPERS = frozenset({"command", "builtin", "exec", "env", "nice", "nohup", "time", "timeout", "sudo", "doas",
                       "stdbuf", "setsid", "noglob", "nocorrect", "-", "xargs", "ionice", "chrt", "taskset",
                       "coproc", "pkexec", "runuser", "sched", "repeat", "unbuffer", "caffeinate", "firejail",
                       "torsocks", "proxychains", "proxychains4", "eatmydata", "chronic", "faketime"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "yash", "ash", "fish", "csh", "tcsh", "busybox"})
_SOURCES = frozenset({"source", ".", "eval"})
# Programs that may run a program named anywhere in their arguments.
_RUNNERS = _WRAPPERS | _SHELLS | _SOURCES | frozenset({
    "find", "parallel", "watch", "su", "script", "flock", "chroot", "unshare", "nsenter", "strace", "ltrace",
    "ssh", "awk", "gawk", "mawk", "nawk", "perl", "python", "ruby", "node", "nodejs", "deno", "bun", "php", "lua",
    "tclsh", "expect", "git", "npx", "uvx", "pipx", "make", "vim", "vi", "nvim", "emacs",
    # Builtins that keep a command for later: the alias, hashed path, trap or completion runs it.
    "alias", "hash", "trap", "complete", "compctl", "bind", "fc", "zargs", "autoload",
})
_TOKEN = re.compile(r"[A-Za-z0-9_.+/-]+")
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_DEPTH = 4


def argument_field(tool_input: Mapping[str, Any]) -> tuple[str, Kind, str | tuple[str, ...]] | None:
    """The field an argument pattern is matched against: its key, its kind and its value; or ``None``."""
    command = tool_input.get("command")
    if isinstance(command, str):
        return "command", "command", command
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return "command", "argv", tuple(command)
    for key in ("file_path", "path"):
        value = tool_input.get(key)
        if isinstance(value, str):
            return key, "path", value
    url = tool_input.get("url")
    if isinstance(url, str):
        return "url", "url", url
    argv = tool_input.get("argv")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return "argv", "argv", tuple(argv)
    return None


def tool_argument(tool_input: Mapping[str, Any]) -> tuple[Kind, str | tuple[str, ...]] | None:
    """The argument an argument pattern is matched against, with its kind, or ``None``."""
    found = argument_field(tool_input)
    return None if found is None else (found[1], found[2])


def command_argument(tool_input: Mapping[str, Any]) -> str | None:
    """The argument as text (an argv joined by spaces), or ``None`` (see :func:`tool_argument`)."""
    found = tool_argument(tool_input)
    if found is None:
        return None
    value = found[1]
    return value if isinstance(value, str) else " ".join(value)


@attrs.frozen(kw_only=True)
class Rule:
    """One ``allow`` or ``deny`` pattern, parsed."""

    pattern: str
    tool: str
    argument: str | None = None
    prefix: bool = False
    """``True`` for ``Tool(words:*)``: the argument must start with ``words`` (as whole words) or lie under a path."""

    words: tuple[str, ...] = attrs.field(init=False)
    """The argument's words (quotes removed when it is a plain command)."""

    @words.default
    def _words(self) -> tuple[str, ...]:
        text = self.argument or ""
        return plain_command(text) or tuple(text.split())

    def matches(
        self, tool_name: str, tool_input: Mapping[str, Any], *, allowing: bool, aliases: Sequence[str] = ()
    ) -> bool:
        """Whether this rule covers the tool use; a deny rule that is unsure covers it (see :meth:`match`)."""
        return self.match(tool_name, tool_input, allowing=allowing, aliases=aliases) != "no"

    def match(
        self, tool_name: str, tool_input: Mapping[str, Any], *, allowing: bool, aliases: Sequence[str] = ()
    ) -> Match:
        """``"yes"``, ``"no"``, or (deny rules only) ``"maybe"``: the rule cannot rule the tool use out.

        ``aliases`` are other names of the same tool use (an ACP tool call's ``kind``).
        """
        names = (tool_name, *aliases)
        if allowing and set(self.tool) & set("*?["):
            # An ACP tool's name is its title, which may be the command itself ("mcp__x; rm -rf ~"):
            # a wildcard allows only names that are names.
            names = tuple(name for name in names if _NAME.fullmatch(name))
        if not any(fnmatch.fnmatchcase(name, self.tool) for name in names):
            return "no"
        if self.argument is None:
            return "yes"
        found = tool_argument(tool_input)
        if found is None:
            return "no"
        kind, value = found
        if kind == "path" and isinstance(value, str):
            return _path_match(self, value, allowing)
        if kind == "url" and isinstance(value, str):
            return _url_match(self, value, allowing)
        if allowing:
            words = plain_command(value) if isinstance(value, str) else (value if all(map(printable, value)) else None)
            return "yes" if words is not None and _words_match(self.words, self.prefix, words) else "no"
        if isinstance(value, str):
            return _deny_script(self, value, 0)
        return _deny_words(self, value, lambda: " ".join(value), 0)


def _words_match(rule: Sequence[str], prefix: bool, words: Sequence[str | None]) -> bool:
    return list(words[: len(rule)] if prefix else words) == list(rule)


def _deny_script(rule: Rule, script: str, depth: int) -> Match:
    found = simple_commands(script)
    result: Match = "maybe" if found.error else "no"
    seen: set[tuple[str | None, ...]] = set()
    for index, words in enumerate(found.commands):
        if words in seen and not any(w is not None and _program(w) in _RUNNERS for w in words):
            continue  # the same words again (their text only matters to a runner's token scan)
        seen.add(words)
        verdict = _deny_words(rule, words, functools.partial(found.text, index), depth)
        if verdict == "yes":
            return "yes"
        if verdict == "maybe":
            result = "maybe"
    return result


@functools.lru_cache(maxsize=4096)
def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


@functools.lru_cache(maxsize=4096)
def _program(word: str) -> str:
    """``python3.11`` is ``python``: runner names without their version."""
    return re.sub(r"[0-9.]+$", "", _base(word)) or _base(word)


def _norm_word(word: str | None) -> str | None:
    if word is None or "/" not in word:
        return word
    return posixpath.normpath(re.sub("/+", "/", word))


def _deny_words(rule: Rule, words: Sequence[str | None], text: Callable[[], str], depth: int) -> Match:
    rest = list(words)
    wanted = [_norm_word(w) or "" for w in rule.words]
    while True:  # the command itself, then what each wrapper (sudo, env, nice, …) runs
        if not rest:
            return "no"
        if rest[0] is None or isinstance(rest[0], Pattern):
            return "maybe"  # the program is an expansion or a glob: it could be any program
        if wanted and "/" not in wanted[0]:
            rest[0] = _base(rest[0])
        if _words_match(wanted, rule.prefix, [_norm_word(w) for w in rest]):
            return "yes"
        if _program(rest[0]) not in _WRAPPERS:
            break
        # A wrapper's options may take values (nice -n 5, sudo -u x): the rule's words anywhere after it match.
        tails = [[_norm_word(w) for w in rest[i:]] for i in range(1, len(rest))]
        if any(tail[0] is not None and _words_match(wanted, rule.prefix, [_base(tail[0]), *tail[1:]])
               for tail in tails):
            return "yes"
        rest = _skip_options(_program(rest[0]), rest[1:])
    program = _program(rest[0])
    if depth < _DEPTH and program in _SHELLS:
        script = _shell_script(rest)
        return "maybe" if script is None else _deny_script(rule, script, depth + 1)
    if depth < _DEPTH and program == "eval":
        args = rest[1:]
        return "maybe" if any(a is None for a in args) else _deny_script(rule, " ".join(a or "" for a in args),
                                                                          depth + 1)
    if program in _SOURCES or program in _SHELLS:
        return "maybe"
    if any(w is not None and _program(w) in _RUNNERS for w in words):
        if any(w is None for w in words[1:]):
            return "maybe"
        tokens = {_base(t) for t in _TOKEN.findall(text())}
        if not wanted or _base(wanted[0]) in tokens:
            return "maybe"
    return "no"


def _skip_options(program: str, rest: list[str | None]) -> list[str | None]:
    i = 0
    while i < len(rest) and rest[i] is not None:
        word = rest[i] or ""
        if not ((word.startswith("-") and word != "-") or (program == "env" and "=" in word)):
            break
        i += 1
    if program == "timeout" and i < len(rest):
        i += 1  # the duration
    return rest[i:]


def _shell_script(words: Sequence[str | None]) -> str | None:
    """The script of ``sh -c SCRIPT`` (any option cluster holding ``c``), else ``None``."""
    seen_c = False
    for word in words[1:]:
        if word is None:
            return None
        if word.startswith(("-", "+")) and word not in ("-", "--"):
            seen_c = seen_c or (not word.startswith("--") and "c" in word[1:])
            continue
        return word if seen_c else None
    return None


def _norm_path(path: str) -> str:
    return posixpath.normpath(re.sub("/+", "/", path)) if path else path


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def _under(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


def _path_match(rule: Rule, value: str, allowing: bool) -> Match:
    """Lexically (normalised), and as this machine resolves symlinks: allow needs both, deny either."""
    wanted = rule.argument or ""
    lexical = _path_compare(rule.prefix, _norm_path(wanted), value, allowing)
    if (lexical == "no") if allowing else (lexical == "yes"):
        return lexical
    try:
        real = _path_compare(rule.prefix, _real(wanted), _real(value), allowing)
    except (OSError, ValueError):
        return "no" if allowing else "maybe"
    if allowing:
        return real
    return "yes" if real == "yes" else ("maybe" if "maybe" in (lexical, real) else "no")


def _real(path: str) -> str:
    """``path`` with the symlinks this machine knows resolved (a relative path stays relative)."""
    return os.path.realpath(path) if path.startswith("/") else _norm_path(path)


def _path_compare(prefix: bool, wanted: str, value: str, allowing: bool) -> Match:
    wanted = _norm_path(wanted)
    if allowing:
        if not printable(value) or not value.startswith("/"):
            return "no"
        path = _norm_path(value)
        return "yes" if path == wanted or (prefix and _under(path, wanted)) else "no"
    # Deny: case-insensitive (macOS, Windows shares), NFC, and a relative path could sit anywhere.
    path, wanted = _fold(_norm_path(value)), _fold(wanted)
    if not path.startswith("/"):
        tail = "/".join(part for part in path.split("/") if part not in ("..", ".", "~"))
        if prefix:
            return "maybe"
        return "maybe" if wanted.endswith("/" + tail) or wanted == tail else "no"
    if not wanted.startswith("/"):  # a relative rule: any absolute path ending in it
        hit = path.endswith("/" + wanted) or (prefix and f"/{wanted}/" in path)
        return "yes" if hit else "no"
    return "yes" if path == wanted or (prefix and _under(path, wanted)) else "no"


def _url_match(rule: Rule, value: str, allowing: bool) -> Match:
    wanted = rule.argument or ""
    if not allowing:
        return _url_deny(wanted, rule.prefix, value)
    if not printable(value):
        return "no"
    if value == wanted:
        return "yes"
    if not rule.prefix or not value.startswith(wanted):
        return "no"
    boundary = wanted.endswith(("/", "?", "#")) or value[len(wanted)] in "/?#"
    return "yes" if boundary else "no"


def _url_parts(url: str) -> tuple[str, str, str]:
    """Scheme, host (lowercased, no user, port or trailing dot) and path of ``url``, leniently."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").rstrip(".")
    return parts.scheme.lower(), host, parts.path or "/"


def _url_deny(wanted: str, prefix: bool, value: str) -> Match:
    try:
        _, host, path = _url_parts(value)  # the scheme aside: http and https name the same resource here
        _, want_host, want_path = _url_parts(wanted)
    except ValueError:
        return "maybe"  # not a URL the rule can read: it cannot rule it out
    if not want_host:
        return "yes" if value.strip().lower() == wanted.lower() else "no"
    if not host:
        return "maybe"
    same_host = host == want_host or host.endswith("." + want_host)  # and its subdomains
    if not same_host:
        return "no"
    path, want_path = _norm_path(path).lower(), _norm_path(want_path).lower()
    if prefix:
        return "yes" if _under(path, want_path) else "no"
    return "yes" if path == want_path else "no"


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


def case_warnings(patterns: Sequence[str]) -> list[str]:
    """One warning per pattern whose tool name differs from a known tool's only in case."""
    known = {name.casefold(): name for name in reversed(KNOWN_TOOLS)}
    out: list[str] = []
    for pattern in patterns:
        tool = parse_rule(pattern).tool
        same = [name for name in KNOWN_TOOLS if name.casefold() == tool.casefold()]
        if tool.casefold() in known and tool not in same:
            out.append(f"tool pattern {pattern!r} never matches {' or '.join(same)}: tool names are case-sensitive")
    return out
