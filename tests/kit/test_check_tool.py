"""``check_tool`` passes a careful tool and names what is wrong with careless ones.

The careful tool reads a note from a directory it confines itself to; each
careless variant changes one thing, as a real bug would.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt.errors import AgentrtError, ToolError
from agentrt.testing import check_tool
from agentrt.tools import ToolContext

PARAMETERS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 255},
        "max_chars": {"type": "integer", "minimum": 1, "maximum": 65536},
    },
}


class ReadNote:
    name = "read_note"
    description = "Read a note by name."
    parameters = PARAMETERS

    def __init__(self, root: Path) -> None:
        self.root = root

    def arguments(self, arguments: Any) -> tuple[str, int]:
        if not isinstance(arguments, Mapping) or not set(arguments) <= {"name", "max_chars"}:
            raise ToolError("note_arguments_invalid", "pass name and optionally max_chars")
        name = arguments.get("name")
        if not isinstance(name, str) or not name or len(name) > 255 or name != os.path.basename(name) \
                or name in (".", "..") or any(ord(c) < 32 or c in "\\%~" for c in name):
            raise ToolError("note_name_invalid", "name must be a plain file name")
        limit = arguments.get("max_chars", 4096)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 65536:
            raise ToolError("note_max_chars_invalid", "max_chars must be an integer from 1 to 65536")
        return name, limit

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        name, limit = self.arguments(arguments)
        try:
            text = await trio.Path(self.root / name).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ToolError("note_not_found", "no note with that name") from None
        except (OSError, UnicodeError, ValueError):
            raise ToolError("note_unreadable", "the note cannot be read") from None
        return {"name": name, "text": text[:limit]}


def factory_for(cls: type[ReadNote]) -> Any:
    def factory(env: Mapping[str, str]) -> ReadNote | None:
        root = env.get("NOTES_DIR")
        if not root:
            return None
        if not os.path.isabs(root) or not os.path.isdir(root):
            raise AgentrtError("notes_dir_invalid", "NOTES_DIR must be an existing absolute directory")
        return cls(Path(root))

    factory.__name__ = cls.__name__
    return factory


@pytest.fixture
def notes(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    return {"NOTES_DIR": str(tmp_path)}


VALID = [{"name": "a.txt"}, {"name": "a.txt", "max_chars": 2}, {"name": "missing.txt"}]


class Lenient(ReadNote):
    def arguments(self, arguments: Any) -> tuple[str, int]:
        return str(arguments.get("name")), 10  # no checks at all: a KeyError/AttributeError waits


class AcceptsWrongTypes(ReadNote):
    def arguments(self, arguments: Any) -> tuple[str, int]:
        if not isinstance(arguments, Mapping) or "name" not in arguments:
            raise ToolError("note_arguments_invalid", "pass name")
        return os.path.basename(str(arguments["name"])) or "x", 10


class Traverses(ReadNote):
    def arguments(self, arguments: Any) -> tuple[str, int]:
        _name, limit = super().arguments({**arguments, "name": "a.txt"} if isinstance(arguments, Mapping)
                                        and isinstance(arguments.get("name"), str) else arguments)
        return arguments["name"], limit  # the real name, unchecked


class EchoesInput(ReadNote):
    def arguments(self, arguments: Any) -> tuple[str, int]:
        try:
            return super().arguments(arguments)
        except ToolError:
            raise ToolError("note_arguments_invalid", f"bad arguments: {arguments!r}"[:100_000]) from None

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        name, _limit = self.arguments(arguments)
        if name != "a.txt" and name != "missing.txt":
            raise ToolError("note_not_found", f"no note {name}")  # raw control characters from the model
        return await super().call(arguments, context)


class HangsOnHuge(ReadNote):
    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        if isinstance(arguments, Mapping) and len(str(arguments.get("name", ""))) > 1_000_000:
            await trio.sleep_forever()
        return await super().call(arguments, context)


class NotJson(ReadNote):
    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        result = await super().call(arguments, context)
        return {**result, "size": math.nan}


class BadName(ReadNote):
    name = "read note!"


class SwallowsCancel(ReadNote):
    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            raise ToolError("note_cancelled", "cancelled") from None
        return await super().call(arguments, context)


def broken_factory(env: Mapping[str, str]) -> ReadNote | None:
    return ReadNote(Path(env["NOTES_DIR"]))  # KeyError on an empty env


async def test_a_careful_tool_conforms(notes: dict[str, str]) -> None:
    await check_tool(factory_for(ReadNote), env=notes, valid=VALID, paths=["name"])


async def test_a_tool_object_is_checked_too(notes: dict[str, str]) -> None:
    await check_tool(ReadNote(Path(notes["NOTES_DIR"])), valid=VALID, paths=["name"])


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Lenient, "arguments that are not an object, arguments None: raised a raw AttributeError"),
        (AcceptsWrongTypes, "'max_chars' of the wrong type, arguments {'name': 'a.txt', 'max_chars': None}: returned"),
        (Traverses, "'name' leaving the tool's directory, arguments {'name': '../../../../../../etc/passwd'}"),
        (EchoesInput, "the detail of note_arguments_invalid is"),
        (HangsOnHuge, "'name' hostile string, arguments {'name': 'AAAA"),
        (NotJson, "valid arguments, arguments {'name': 'a.txt'}: the result"),
        (BadName, "name 'read note!' must match"),
        (SwallowsCancel, "a cancelled call raised note_cancelled"),
    ],
)
async def test_a_careless_tool_fails_naming_what(notes: dict[str, str], cls: type[ReadNote], message: str) -> None:
    with pytest.raises(AssertionError) as info:
        await check_tool(factory_for(cls), env=notes, valid=VALID, paths=["name"], hang_after=5.0)
    assert message in str(info.value)
    assert str(info.value).startswith(f"check_tool({cls.name})")


async def test_control_characters_in_a_detail_are_caught(notes: dict[str, str]) -> None:
    class Raw(ReadNote):
        def arguments(self, arguments: Any) -> tuple[str, int]:
            name = arguments.get("name") if isinstance(arguments, Mapping) else None
            if isinstance(name, str) and "\x1b" in name:
                raise ToolError("note_name_invalid", f"bad name {name}")  # the model's escape codes, raw
            return super().arguments(arguments)

    with pytest.raises(AssertionError, match="the detail of note_name_invalid has raw control characters"):
        await check_tool(factory_for(Raw), env=notes, valid=VALID, paths=["name"])


async def test_a_factory_that_raises_raw_is_caught(notes: dict[str, str]) -> None:
    with pytest.raises(AssertionError, match=r"check_tool\(broken_factory\): the factory raised a raw KeyError"):
        await check_tool(broken_factory, env=notes, valid=VALID)


async def test_a_factory_that_is_not_configured_is_named(notes: dict[str, str]) -> None:
    with pytest.raises(AssertionError, match="returned None for env"):
        await check_tool(factory_for(ReadNote), env={}, valid=VALID)


async def test_without_valid_arguments_the_schema_makes_the_base(notes: dict[str, str]) -> None:
    # {"name": "example"} names no note: an AgentrtError answer is fine for the base then.
    await check_tool(factory_for(ReadNote), env=notes, paths=["name"])
    message = re.escape("'name' leaving the tool's directory, arguments {'name': '../../")
    with pytest.raises(AssertionError, match=message):
        await check_tool(factory_for(Traverses), env=notes, paths=["name"])
