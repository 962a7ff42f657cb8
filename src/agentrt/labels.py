"""Tool labels: the short, bounded text a host shows while an agent runs a tool.

The labels are the original AWP host's (``_toolStatusLabel``): a CLI reports a
``tool_use`` with a name and an input, and the user sees "Running: git status"
or "Editing app.py" instead of the raw payload.  MCP tool names lose their
``mcp__<server>__`` prefix first, so an MCP-served ``Bash`` gets the Bash label.

Labels never carry more than the first line of a command (cut to 40
characters) or a file's basename, and are bounded to :data:`MAX_LABEL`
characters whatever the input: a tool payload can be large and private.
What an agent wrote is escaped (:func:`agentrt.display.escape_text`) before
it is cut: no escape sequence, carriage return or bidi override reaches a
terminal or page through a label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .display import escape_text

__all__ = ["tool_label", "strip_mcp_prefix", "MAX_LABEL", "MAX_COMMAND"]

#: Upper bound of every label, in characters.
MAX_LABEL = 80
#: A command's first line is cut to this many characters (then ``...``).
MAX_COMMAND = 40

_MCP_PREFIX = re.compile(r"^mcp__[^_]+__(?:[^_]+__)?")

_COMMAND_TOOLS = frozenset({"Bash", "vm_exec", "vm_exec_stream"})
_FILE_TOOLS: dict[str, str] = {
    "Write": "Writing",
    "vm_write_file": "Writing",
    "Read": "Reading",
    "vm_read_file": "Reading",
    "Edit": "Editing",
    "MultiEdit": "Editing",
}
_FIXED: dict[str, str] = {
    "awp_save_artifact": "Saving artifact",
    "awp_open_file_in_tab": "Opening file",
    "awp_notify_user": "",
    "Grep": "Searching code",
    "Glob": "Finding files",
    "WebSearch": "Retrieving information",
    "WebFetch": "Retrieving information",
    "TodoWrite": "Updating task list",
    "Task": "Running subtask",
}
_DEFAULT = "Working"


def strip_mcp_prefix(name: str) -> str:
    """``name`` without an ``mcp__<server>__`` (or ``mcp__<server>__<ns>__``) prefix."""
    if not name.startswith("mcp__"):  # the common case, without the regex
        return name
    return _MCP_PREFIX.sub("", name, count=1)


def _bound(label: str) -> str:
    if len(label) <= MAX_LABEL:
        return label
    return label[: MAX_LABEL - 3] + "..."


def _basename(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    # Both separators: a Windows agent reports backslash paths to a POSIX host.
    path = value.rstrip("\\/")
    return path[max(path.rfind("/"), path.rfind("\\")) + 1 :].strip()


def _command_label(tool_input: Mapping[str, Any]) -> str:
    command = tool_input.get("command")
    if not isinstance(command, str):
        command = tool_input.get("cmd")
    if not isinstance(command, str):
        return "Running command"
    text = command.lstrip()
    end = text.find("\n")
    line = (text if end < 0 else text[:end]).strip()
    if not line:
        return "Running command"
    # Escaping is per character, so the cut label needs only the line's first
    # MAX_COMMAND + 1 characters escaped: a command of a megabyte on one line
    # cost ~0.4 ms of escaping per call before, for a label of 40 characters.
    first = escape_text(line[: MAX_COMMAND + 1])
    if len(first) > MAX_COMMAND:
        first = first[:MAX_COMMAND] + "..."
    return f"Running: {first}"


def tool_label(name: Any, tool_input: Any = None) -> str:
    """The bounded status label for a call of tool ``name`` with ``tool_input``.

    Never raises: a missing or odd-shaped name or input gives a generic label.
    """
    if not isinstance(name, str):
        return _DEFAULT
    base = strip_mcp_prefix(name)
    args: Mapping[str, Any] = tool_input if type(tool_input) is dict or isinstance(tool_input, Mapping) else {}
    if base in _COMMAND_TOOLS:
        return _bound(_command_label(args))
    verb = _FILE_TOOLS.get(base)
    if verb is not None:
        path = args.get("file_path")
        if not isinstance(path, str):
            path = args.get("path")
        # As for a command: the bounded label shows at most MAX_LABEL characters of it.
        target = escape_text(_basename(path)[: MAX_LABEL + 1])
        return _bound(f"{verb} {target}" if target else f"{verb} file")
    return _FIXED.get(base, _DEFAULT)
