"""The example-tool agentrt plugin: hook implementations only (the tool is imported on first use)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agentrt import hookimpl

if TYPE_CHECKING:
    from agentrt.tools import Tool, ToolFactory


def make_tool(env: Mapping[str, str]) -> Tool | None:
    """The registered factory: a tool when EXAMPLE_NOTES_DIR is set, ``None`` (not offered) otherwise."""
    if not env.get("EXAMPLE_NOTES_DIR"):
        return None
    from ._tool import ReadNoteTool, notes_dir_from_env

    return ReadNoteTool(notes_dir_from_env(env))


@hookimpl
def agentrt_register_tools(register: Callable[[str, ToolFactory], None]) -> None:
    """Register the ``read_note`` tool."""
    register("read_note", make_tool)
