"""Shell commands as the approval rules see them, parsed by tree-sitter-bash.

Two questions, asked by the two kinds of rule:

* :func:`plain_command` (allow rules): is the text *provably* one simple
  command of plain words, the same in bash and in zsh?  Then its words, else
  ``None``.  Provably means: tree-sitter parses it without error as exactly one
  ``command`` node; every byte is inside one of its words or is a space between
  them; outside quotes a word holds only ``A-Z a-z 0-9 _ - . / : , @ % + =``
  (``=`` never first); single-quoted text holds anything printable (never two
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

import unicodedata
from collections.abc import Iterator

import attrs
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = ["MAX_PARSE", "Pattern", "ShellCommands", "plain_command", "printable", "simple_commands"]

#: Longer texts are not parsed: an allow rule never matches them, a deny rule is unsure.
MAX_PARSE = 1 << 20

_LANGUAGE = Language(tree_sitter_bash.language())
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


def _parse(text: str) -> tuple[bytes, Node]:
    data = text.encode("utf-8", "surrogatepass")
    return data, Parser(_LANGUAGE).parse(data).root_node


def plain_command(text: str) -> tuple[str, ...] | None:
    """The words of ``text`` (quotes removed) when it is provably one simple command of plain words."""
    if not text or len(text) > MAX_PARSE or not printable(text):
        return None
    data, root = _parse(text)
    if root.has_error or len(root.children) != 1 or root.children[0].type != "command":
        return None
    parts = root.children[0].children
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
        piece = _plain_piece(child)
        if piece is None:
            return None
        pieces.append(piece)
        pos, previous = child.end_byte, child.type
    return "".join(pieces) if pos == node.end_byte else None


def _plain_piece(node: Node) -> str | None:
    raw = _text(node)
    if node.type in ("word", "number"):
        return raw if raw and set(raw) <= _SAFE else None
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
    texts: tuple[str, ...]
    """Each simple command's source text (parallel to :attr:`commands`)."""
    error: bool
    """The parser could not parse all of the text (or it was too long to parse)."""


def simple_commands(text: str) -> ShellCommands:
    """Every simple command ``text`` may run, with its literal words (see the module docstring)."""
    if len(text) > MAX_PARSE:
        return ShellCommands((), (), True)
    _, root = _parse(text)
    commands: list[tuple[str | None, ...]] = []
    texts: list[str] = []
    for node in _walk(root):
        if node.type != "command":
            continue
        words: list[str | None] = []
        for child in node.children:
            if child.type in _SKIPPED or not child.is_named:
                continue
            target = child.children[0] if child.type == "command_name" and child.children else child
            words.append(_loose_word(target))
        if words:
            commands.append(tuple(words))
            texts.append(_text(node))
    return ShellCommands(tuple(commands), tuple(texts), root.has_error)


def _walk(root: Node) -> Iterator[Node]:
    stack = [root]  # iterative: $( $( $( … ) ) ) nests deeper than Python's recursion limit
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


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
