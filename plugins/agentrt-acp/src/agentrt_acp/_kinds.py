"""ACP tool kinds for the tool names of the CLIs agentrt hosts (the icon an editor shows per tool call).

ACP's ``ToolKind`` is one of ``read``, ``edit``, ``delete``, ``move``,
``search``, ``execute``, ``think``, ``fetch``, ``switch_mode``, ``other``.
Claude Code, Gemini CLI and Codex name their tools themselves; an ACP agent
hosted by the bridge already reports a kind (kept as is).  Anything unknown
is ``other``.
"""

from __future__ import annotations

__all__ = ["KINDS", "tool_kind"]

#: ACP's tool kinds.
KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})

_BY_NAME = {
    # Claude Code
    "bash": "execute", "bashoutput": "execute", "killshell": "execute", "killbash": "execute",
    "read": "read", "notebookread": "read", "ls": "read",
    "write": "edit", "edit": "edit", "multiedit": "edit", "notebookedit": "edit",
    "glob": "search", "grep": "search",
    "webfetch": "fetch", "websearch": "fetch",
    "task": "think", "todowrite": "think", "exitplanmode": "switch_mode",
    # Gemini CLI
    "run_shell_command": "execute", "read_file": "read", "read_many_files": "read", "list_directory": "read",
    "write_file": "edit", "replace": "edit", "glob_tool": "search", "search_file_content": "search",
    "web_fetch": "fetch", "google_web_search": "fetch",
    # Codex
    "shell": "execute", "shell_command": "execute", "exec_command": "execute", "apply_patch": "edit",
    "view_image": "read", "web_search": "fetch", "update_plan": "think",
}  # fmt: skip


def tool_kind(name: str | None) -> str:
    """The ACP kind of a tool called ``name`` (``mcp__server__tool`` names are ``other``)."""
    if not name:
        return "other"
    if name in KINDS:
        return name
    return _BY_NAME.get(name.lower(), "other")
