"""The lines a tool call gets of its own in the terminal: what runs, then how it ended.

A call is its tool's name and the whole command (each of its lines, escaped:
what an agent runs is shown whole, never cut) or, for a tool without a
command, a one-line summary; its result is one line (the first line of the
output, bounded, and how many more there were), or how it failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.events import ToolResult, ToolUse

__all__ = ["RESULT_MAX", "call_lines", "result_line"]

RESULT_MAX = 100
"""The most characters of a tool's output the result line shows."""


def call_lines(event: ToolUse) -> tuple[str, list[str]]:
    """``(name, lines)``: the tool's name and the whole command, one escaped line each, or a summary."""
    from agentrt.display import escape_text
    from agentrt.labels import strip_mcp_prefix, tool_label

    name = escape_text(strip_mcp_prefix(event.name)) if isinstance(event.name, str) else "tool"
    args: Any = event.input
    command = None
    if isinstance(args, Mapping):
        for key in ("command", "cmd"):
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                command = value
                break
    if command is not None:
        return name, [escape_text(line) for line in command.strip("\n").split("\n")]
    summary = event.summary or tool_label(event.name, args)
    return name, [escape_text(summary)] if summary else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(content, list):
        return "\n".join(_text_of(block) for block in content)
    return "" if content is None else str(content)


def result_line(event: ToolResult) -> str:
    """One line for a tool's result: its output's first line (bounded) and how many lines follow, or the failure."""
    from agentrt.display import escape_text

    lines = [line for line in _text_of(event.content).splitlines() if line.strip()]
    first = escape_text(lines[0].strip()) if lines else ""
    if len(first) > RESULT_MAX:
        first = first[: RESULT_MAX - 1] + "…"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    if event.is_error:
        return f"failed: {first}{more}" if first else "failed"
    return f"{first}{more}" if first else "(no output)"
