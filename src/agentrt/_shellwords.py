"""Shell commands as the approval rules see them, parsed by tree-sitter-bash.

Two questions, asked by the two kinds of rule:

* :func:`plain_command` (allow rules): is the text *provably* one simple
  command of plain words, the same in bash and in zsh?  Then its words, else
  ``None``.  Provably means: tree-sitter parses it without error as exactly one
  ``command`` node; every byte is inside one of its words or is a space between
  them; outside quotes a word holds only ``A-Z a-z 0-9 _ - . / : , @ % + =``
  (``=`` never first, nor after ``=`` or ``:``); single-quoted text holds anything printable (never two
  single-quoted pieces side by side: zsh's RC_QUOTES reads ``'a''b'`` as one);
  double-quoted text holds no ``$``, backtick, backslash or ``!``; nothing at
  all is a control, format, bidi or separator character other than the space.
  No expansion, substitution, glob, redirection, assignment or second command
  can pass, in bash syntax or zsh's (``=(cmd)``, ``*(e:'cmd':)``, ``*(+cmd)``
  all need a character outside that set).
* :func:`simple_commands` (deny rules): every simple command the text may run,
  wherever it sits (lists, pipelines, ``$( )``, backticks, subshells, bodies
  of ``if``/``while``/functions, here-documents), each as its words after the
  leading ``VAR=value`` assignments and redirections, quotes removed; a word
  the parser cannot reduce to a literal (an expansion) is ``None``.  A parse
  error is reported, so a caller can err on the side of matching.
"""

from __future__ import annotations

import functools
import time
import unicodedata

import attrs
import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Query, QueryCursor

__all__ = [
    "MAX_COMMANDS", "MAX_PARSE", "PARSE_BUDGET", "Pattern", "ShellCommands", "plain_command", "printable",
    "simple_commands",
]

#: Longer texts (in characters) are not parsed: an allow rule never matches them, a deny rule is unsure.
#: tree-sitter-bash recovers from some errors in time that grows faster than the text (``a|a|…|a|``:
#: about 1 s at 4 KiB, 3 s at 8 KiB, 99 s at 64 KiB on a loaded 2-core machine), so the bound is small.
MAX_PARSE = 4096
#: Seconds the parser may take; past them it gives up (an allow rule does not match, a deny rule is unsure).
#: It can only stop between steps, and one step of error recovery can take longer.
PARSE_BUDGET = 0.25
#: Simple commands (or a plain command's words) looked at; past them the same.
MAX_COMMANDS = 20_000

_LANGUAGE = Language(tree_sitter_bash.language())
# Every simple command, found by tree-sitter itself (a walk in Python costs a second per 100,000 nodes).
_COMMANDS = Query(_LANGUAGE, "(command) @command")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./:,@%+=")
_UNSAFE_IN_DOUBLE = frozenset("$`\\!")
# Unicode categories never part of a plain command: controls, format (bidi, zero-width), line and
# paragraph separators, surrogates, private use, unassigned.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_SKIPPED = frozenset({"variable_assignment", "file_redirect", "heredoc_redirect", "herestring_redirect"})
# Unquoted, these make a word a pattern the shell expands (globs, braces, zsh's extended globs).
_PATTERN_CHARS = frozenset("*?[]{}~^#<>")


class Pattern(str):
    """A word the shell expands before it runs (``r?``, ``{rm,x}``, ``/bin/r[m]``): its text, unexpanded."""


def printable(text: str) -> bool:
    """Whether ``text`` has no control, format, separator (but the space) or unassigned character."""
    for ch in text:
        if ch == " ":
            continue
        category = unicodedata.category(ch)
        if category in _UNPRINTABLE or category == "Zs":
            return False
    return True


@functools.lru_cache(maxsize=4)  # plain_command and simple_commands parse the same text
def _parse(text: str) -> tuple[bytes, Node | None]:
    """The text's bytes and its syntax tree, or ``None`` when the parser ran out of its budget."""
    data = text.encode("utf-8", "surrogatepass")
    deadline = time.monotonic() + PARSE_BUDGET

    def read(offset: int, _point: object) -> bytes:
        return data[offset:offset + 65536]

    def give_up(*_state: object) -> bool:
        return time.monotonic() > deadline

    try:
        return data, Parser(_LANGUAGE).parse(read, progress_callback=give_up).root_node
    except ValueError:  # "Parsing failed": the budget ran out
        return data, None


@functools.lru_cache(maxsize=16)  # every allow rule asks about the same command
def plain_command(text: str) -> tuple[str, ...] | None:
    """The words of ``text`` (quotes removed) when it is provably one simple command of plain words."""
    if not text or len(text) > MAX_PARSE or not printable(text):
        return None
    data, root = _parse(text)
    if root is None or root.has_error or len(root.children) != 1 or root.children[0].type != "command":
        return None
    parts = root.children[0].children
    if len(parts) > MAX_COMMANDS:
        return None
    if not parts or parts[0].type != "command_name" or len(parts[0].children) != 1:
        return None
    nodes = [parts[0].children[0], *parts[1:]]
    words: list[str] = []
    pos = 0
    for node in nodes:
        gap = data[pos:node.start_byte]
        if gap.strip(b" ") or (words and not gap):
            return None
        word = _plain_word(node)
        if word is None:
            return None
        words.append(word)
        pos = node.end_byte
    if data[pos:].strip(b" "):
        return None
    return tuple(words)


def _plain_word(node: Node) -> str | None:
    raw = _text(node)
    if raw.startswith("="):  # zsh: =cmd expands to a path, =(cmd) runs cmd
        return None
    if node.type != "concatenation":
        return _plain_piece(node)
    pieces: list[str] = []
    pos = node.start_byte
    previous = ""
    for child in node.children:
        if child.start_byte != pos or (previous == "raw_string" and child.type == "raw_string"):
            return None
        if child.type in ("word", "number") and _text(child).startswith("="):
            return None  # zsh's magicequalsubst: a=''=cmd expands =cmd
        piece = _plain_piece(child)
        if piece is None:
            return None
        pieces.append(piece)
        pos, previous = child.end_byte, child.type
    return "".join(pieces) if pos == node.end_byte else None


def _plain_piece(node: Node) -> str | None:
    raw = _text(node)
    if node.type in ("word", "number"):
        # zsh's magicequalsubst expands =cmd after an = or a : (a==ls is a=/bin/ls).
        return raw if raw and set(raw) <= _SAFE and "==" not in raw and ":=" not in raw else None
    if node.type == "raw_string":
        return raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == "'" and "'" not in raw[1:-1] else None
    if node.type == "string":
        inner = [c.type for c in node.children]
        if inner[:1] != ['"'] or inner[-1:] != ['"'] or any(t != "string_content" for t in inner[1:-1]):
            return None
        body = raw[1:-1]
        return body if len(raw) >= 2 and not (set(body) & _UNSAFE_IN_DOUBLE) and '"' not in body else None
    return None


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


@attrs.frozen
class ShellCommands:
    """Every simple command of a text (see :func:`simple_commands`)."""

    commands: tuple[tuple[str | None, ...], ...]
    """Each simple command's words; ``None`` for a word that is not a literal (an expansion)."""
    spans: tuple[tuple[int, int], ...]
    """Each simple command's place in the source, in UTF-8 bytes (parallel to :attr:`commands`)."""
    source: bytes
    """The source, UTF-8."""
    error: bool
    """The parser could not parse all of the text (or it was too long to parse)."""

    def text(self, index: int) -> str:
        """The source text of simple command ``index``."""
        start, end = self.spans[index]
        return self.source[start:end].decode("utf-8", "surrogatepass")


@functools.lru_cache(maxsize=16)  # every deny rule asks about the same command
def simple_commands(text: str) -> ShellCommands:
    """Every simple command ``text`` may run, with its literal words (see the module docstring)."""
    if len(text) > MAX_PARSE:
        return ShellCommands((), (), b"", True)
    data, root = _parse(text)
    if root is None:
        return ShellCommands((), (), b"", True)
    commands: list[tuple[str | None, ...]] = []
    spans: list[tuple[int, int]] = []
    found = QueryCursor(_COMMANDS).captures(root).get("command", [])
    if len(found) > MAX_COMMANDS:
        return ShellCommands((), (), b"", True)
    for node in sorted(found, key=lambda n: n.start_byte):
        words: list[str | None] = []
        for child in node.children:
            if child.type in _SKIPPED or not child.is_named:
                continue
            target = child.children[0] if child.type == "command_name" and child.children else child
            words.append(_loose_word(target))
        if words:
            commands.append(tuple(words))
            spans.append((node.start_byte, node.end_byte))
    return ShellCommands(tuple(commands), tuple(spans), data, root.has_error)


def _loose_word(node: Node) -> str | None:
    """A word with quotes and backslashes removed, or ``None`` when it holds an expansion."""
    kind = node.type
    raw = _text(node)
    if kind in ("word", "number"):
        if set(raw) & _PATTERN_CHARS:
            return Pattern(raw)
        if "\\" not in raw:
            return raw
        out: list[str] = []
        chars = iter(raw)
        for ch in chars:
            out.append(next(chars, "") if ch == "\\" else ch)
        return "".join(out)
    if kind == "raw_string":
        return raw[1:-1]
    if kind == "string":
        if any(c.type not in ('"', "string_content") for c in node.children):
            return None
        return raw[1:-1].replace('\\"', '"').replace("\\\\", "\\").replace("\\$", "$").replace("\\`", "`")
    if kind == "concatenation":
        pieces = [_loose_word(c) for c in node.children]
        if any(p is None for p in pieces):
            return None
        joined = "".join(p or "" for p in pieces)
        return Pattern(joined) if any(isinstance(p, Pattern) for p in pieces) else joined
    return None
