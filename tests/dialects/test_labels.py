"""Tool labels: the original AWP host's ``_toolStatusLabel`` table."""

from __future__ import annotations

from typing import Any

import pytest

from agentrt.labels import MAX_LABEL, strip_mcp_prefix, tool_label


@pytest.mark.parametrize(
    ("name", "tool_input", "label"),
    [
        ("Bash", {"command": "git status"}, "Running: git status"),
        ("Bash", {"command": "  ls -la  \nrm -rf /tmp/x"}, "Running: ls -la"),
        ("Bash", {"command": "x" * 40}, "Running: " + "x" * 40),
        ("Bash", {"command": "y" * 41}, "Running: " + "y" * 40 + "..."),
        ("Bash", {"command": "   "}, "Running command"),
        ("Bash", {}, "Running command"),
        ("Bash", None, "Running command"),
        ("Bash", {"command": 12}, "Running command"),
        ("vm_exec", {"cmd": "make test"}, "Running: make test"),
        ("vm_exec_stream", {"command": "pytest -q"}, "Running: pytest -q"),
        ("Write", {"file_path": "/home/u/project/src/app.py"}, "Writing app.py"),
        ("vm_write_file", {"path": "C:\\work\\notes.txt"}, "Writing notes.txt"),
        ("Read", {"file_path": "README.md"}, "Reading README.md"),
        ("vm_read_file", {"path": "/etc/hosts"}, "Reading hosts"),
        ("Edit", {"file_path": "/a/b/c.ts"}, "Editing c.ts"),
        ("MultiEdit", {"file_path": "/a/b/d.ts"}, "Editing d.ts"),
        ("Edit", {}, "Editing file"),
        # The basename: after the last separator of either kind, trailing separators and spaces dropped
        ("Read", {"file_path": "src/pkg/"}, "Reading pkg"),
        ("Read", {"file_path": "a\\b/c\\ d.py "}, "Reading d.py"),
        ("Read", {"file_path": "/"}, "Reading file"),
        ("Read", {"file_path": "plain.txt"}, "Reading plain.txt"),
        ("Read", {"file_path": "x/\\"}, "Reading x"),
        ("awp_save_artifact", {}, "Saving artifact"),
        ("awp_open_file_in_tab", {"path": "/x"}, "Opening file"),
        ("awp_notify_user", {"message": "hi"}, ""),
        ("Grep", {"pattern": "x"}, "Searching code"),
        ("Glob", {"pattern": "*.py"}, "Finding files"),
        ("WebSearch", {"query": "q"}, "Retrieving information"),
        ("WebFetch", {"url": "https://example.org"}, "Retrieving information"),
        ("TodoWrite", {"todos": []}, "Updating task list"),
        ("Task", {"prompt": "p"}, "Running subtask"),
        ("awp_run_managed_task", {"argv": ["echo"]}, "Working"),
        ("SomethingElse", {}, "Working"),
        (None, {}, "Working"),
        ("", {}, "Working"),
        # MCP prefixes: server, then an optional namespace
        ("mcp__ide__Bash", {"command": "echo 1"}, "Running: echo 1"),
        ("mcp__awp-ide__tools__Read", {"file_path": "/x/y.md"}, "Reading y.md"),
        ("mcp__srv__awp_notify_user", {}, ""),
        ("mcp__srv__unknown_tool", {}, "Working"),
    ],
)
def test_tool_label(name: Any, tool_input: Any, label: str) -> None:
    assert tool_label(name, tool_input) == label


def test_labels_are_bounded() -> None:
    long_name = "a" * 500 + ".txt"
    label = tool_label("Write", {"file_path": "/x/" + long_name})
    assert len(label) == MAX_LABEL and label.endswith("...") and label.startswith("Writing aaa")
    assert len(tool_label("Bash", {"command": "z" * 10_000})) <= MAX_LABEL


def test_strip_mcp_prefix() -> None:
    assert strip_mcp_prefix("mcp__server__tool") == "tool"
    assert strip_mcp_prefix("mcp__server__ns__tool") == "tool"
    assert strip_mcp_prefix("mcp__server__ns__deeper__tool") == "deeper__tool"  # at most two segments
    assert strip_mcp_prefix("Bash") == "Bash"
    assert strip_mcp_prefix("xmcp__a__b") == "xmcp__a__b"


def _label_escaping_everything(name: str, tool_input: dict[str, Any]) -> str:
    """The label as the whole first line (or basename) escaped, then cut: what the cut label must equal."""
    from agentrt.display import escape_text
    from agentrt.labels import MAX_COMMAND

    if name == "Bash":
        first = escape_text(tool_input["command"].strip().split("\n", 1)[0].strip())
        label = f"Running: {first[:MAX_COMMAND]}..." if len(first) > MAX_COMMAND else f"Running: {first}"
    else:
        path = tool_input["file_path"].rstrip("\\/")
        label = "Reading " + escape_text(path[max(path.rfind("/"), path.rfind("\\")) + 1 :].strip())
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 3] + "..."


@pytest.mark.parametrize(
    "tool_input",
    [
        {"command": "\x1b[2J" * 20_000},
        {"command": "  \u202e" + "é\x00" * 30 + "\nsecond line"},
        {"command": "a" * 39 + "\x1b" + "tail"},
        {"command": "a" * 40 + "\x1b"},
        {"command": "\t\u2028 echo hi \u2028\n"},
        {"file_path": "/d/" + "\x07" * 50_000},
        {"file_path": "/d/" + "n" * 70 + "\x1b" * 3},
        {"file_path": "r\u00e9sum\u00e9\u200b.txt  "},
    ],
)
def test_a_label_escapes_only_what_it_shows_and_equals_escaping_everything(
    tool_input: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentrt.display as display

    expected = _label_escaping_everything("Bash" if "command" in tool_input else "Read", tool_input)
    seen: list[int] = []
    units = display._units
    monkeypatch.setattr(display, "_units", lambda text: seen.append(len(text)) or units(text))
    label = tool_label("Bash" if "command" in tool_input else "Read", tool_input)
    assert label == expected
    # A megabyte of command or path costs a label's worth of escaping, not the whole value's.
    assert sum(seen) <= MAX_LABEL + 1, seen
