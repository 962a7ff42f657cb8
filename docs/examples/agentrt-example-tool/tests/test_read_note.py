"""The read_note tool passes agentrt's tool conformance suite, loaded through its entry point."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import trio

from agentrt import Plugins
from agentrt.testing import check_tool
from agentrt.tools import ToolContext, ToolFactory

CONTEXT = ToolContext(session_id="s-1", turn_identity="0" * 64, tool_call_id="call_1")


def factory() -> ToolFactory:
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "example-tool"})
    return plugins.tools()["read_note"]


def test_conformance(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello, notes", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.txt").write_text("deeper", encoding="utf-8")
    valid: list[dict[str, Any]] = [
        {"name": "hello.txt"}, {"name": "sub/deep.txt"}, {"name": "hello.txt", "max_chars": 5},
    ]
    env = {"EXAMPLE_NOTES_DIR": str(tmp_path)}
    trio.run(functools.partial(check_tool, factory(), env=env, valid=valid, paths=["name"]))


def test_reads_a_note_and_stays_inside(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    (tmp_path / "notes" / "link.txt").symlink_to(tmp_path / "secret.txt")
    tool = factory()({"EXAMPLE_NOTES_DIR": str(tmp_path / "notes")})
    assert tool is not None
    assert trio.run(tool.call, {"name": "a.txt"}, CONTEXT) == {"name": "a.txt", "text": "inside", "truncated": False}
    for name in ("../secret.txt", "link.txt"):
        try:
            trio.run(tool.call, {"name": name}, CONTEXT)
        except Exception as exc:
            assert getattr(exc, "code", "") in ("read_note_name_invalid", "read_note_outside_dir"), exc
        else:
            raise AssertionError(f"{name} was read")
    assert factory()({}) is None  # not configured: not offered
