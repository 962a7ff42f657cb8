"""The optional parts of the built-in agent codecs: declared Protocols and flags, as docs/dialects.md lists them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentrt import Plugins
from agentrt.dialect import (
    AgentCodec,
    AsksPermission,
    DefersNewSessions,
    Interruptible,
    KeepsHostCodec,
    OpensSessionEarly,
    OpensSessions,
    PartialMessages,
    RepliesToStartupError,
    Turn,
)

PLUGINS = Plugins(autoload=True)
PARTS = (PartialMessages, AsksPermission, OpensSessions, DefersNewSessions, RepliesToStartupError)
DOC = Path(__file__).resolve().parents[2] / "docs" / "dialects.md"


def _documented() -> dict[str, list[bool]]:
    row = r"^\| (awp-jsonl|stream-json|acp) \| ((?:(?:yes|no) \| ){6}(?:yes|no)) \|$"
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
    assert [isinstance(live, part) for part in PARTS] == [True, False, False, False, True]


def test_interruptible_host_codecs() -> None:
    # The host side's declared part: the codecs whose protocol can end a running turn.
    names = ("awp-jsonl", "stream-json", "acp")
    found = {name: isinstance(PLUGINS.dialect(name).host_codec(), Interruptible) for name in names}
    assert found == {"awp-jsonl": False, "stream-json": True, "acp": True}


def test_host_codecs_that_open_sessions_early_and_dialects_that_keep_their_host_codec() -> None:
    # The bridge hosts an ACP agent's session only through these declared parts, never a probe by name.
    names = ("awp-jsonl", "stream-json", "acp")
    keeps = {name: isinstance(PLUGINS.dialect(name), KeepsHostCodec) for name in names}
    early = {name: isinstance(PLUGINS.dialect(name).host_codec(), OpensSessionEarly) for name in names}
    assert keeps == early == {"awp-jsonl": False, "stream-json": False, "acp": True}
    dialect = PLUGINS.dialect("acp")
    assert isinstance(dialect, KeepsHostCodec)
    codec = dialect.host_codec()
    assert dialect.current_host_codec is codec


def test_a_new_session_answer_is_deferred_only_by_a_codec_that_says_so() -> None:
    class Sessions(AgentCodec):
        load_sessions = False
        options = None

        def decode_input(self, obj: object) -> Turn:
            return Turn.text("x")

        def encode(self, event: object) -> list[dict[str, str]]:
            return []

        def take_opened(self) -> list[tuple[str, object, str, object, str | None]]:
            return []

        def answer_switch(self, kind: str, rid: object, error: str | None = None,
                          value: str | None = None) -> list[dict[str, str]]:
            return []

        def replay(self, session_id: str, events: object) -> list[dict[str, str]]:
            return []

    class Deferring(Sessions):
        defer_new = False

        def answer_forwarded(self, kind: str, rid: object, value: object, response: object) -> list[dict[str, str]]:
            return []

    assert isinstance(Sessions(), OpensSessions) and not isinstance(Sessions(), DefersNewSessions)
    assert isinstance(Deferring(), DefersNewSessions)
