"""The optional parts of the built-in agent codecs: declared Protocols and flags, as docs/dialects.md lists them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentrt import Plugins
from agentrt.dialect import (
    AgentCodec,
    AsksPermission,
    Interruptible,
    OpensSessions,
    PartialMessages,
    RepliesToStartupError,
    Turn,
)

PLUGINS = Plugins(autoload=True)
PARTS = (PartialMessages, AsksPermission, OpensSessions, RepliesToStartupError)
DOC = Path(__file__).resolve().parents[2] / "docs" / "dialects.md"


def _documented() -> dict[str, list[bool]]:
    row = r"^\| (awp-jsonl|stream-json|acp) \| ((?:(?:yes|no) \| ){5}(?:yes|no)) \|$"
    rows = re.findall(row, DOC.read_text(), re.M)
    return {name: [cell == "yes" for cell in cells.split(" | ")] for name, cells in rows}


@pytest.mark.parametrize("name", ["awp-jsonl", "stream-json", "acp"])
def test_each_builtin_agent_codec_has_the_parts_the_docs_list(name: str) -> None:
    codec = PLUGINS.dialect(name).agent_codec()
    found = [isinstance(codec, part) for part in PARTS] + [codec.asks_only_when_told, codec.cancel_on_close]
    assert found == _documented()[name]


def test_a_codec_has_a_part_by_defining_its_members() -> None:
    class Plain(AgentCodec):
        def decode_input(self, obj: object) -> Turn:
            return Turn.text("x")

        def encode(self, event: object) -> list[dict[str, str]]:
            return []

    class Live(Plain):
        partial = False

        @staticmethod
        def startup_error_reply(obj: object, code: str, message: str) -> dict[str, str] | None:
            return {"error": code}

    assert not any(isinstance(Plain(), part) for part in PARTS)
    assert not Plain().asks_only_when_told and not Plain().cancel_on_close
    live = Live()
    assert [isinstance(live, part) for part in PARTS] == [True, False, False, True]


def test_interruptible_host_codecs() -> None:
    # The host side's declared part: the codecs whose protocol can end a running turn.
    names = ("awp-jsonl", "stream-json", "acp")
    found = {name: isinstance(PLUGINS.dialect(name).host_codec(), Interruptible) for name in names}
    assert found == {"awp-jsonl": False, "stream-json": True, "acp": True}
