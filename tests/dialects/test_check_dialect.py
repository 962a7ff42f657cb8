"""``agentrt.testing.check_dialect``: the built-in dialects pass it, broken dialects fail it clearly."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
import pytest

from agentrt.dialect import AgentCodec, AgentInput, Dialect, HostCodec, Interrupt, Turn
from agentrt.events import Event, TextDelta
from agentrt.testing import check_dialect
from agentrt_awp_jsonl.codec import AwpAgentCodec, AwpHostCodec, AwpJsonlDialect
from agentrt_stream_json.codec import StreamJsonDialect


@pytest.mark.parametrize(
    "factory",
    [
        AwpJsonlDialect,
        lambda: AwpJsonlDialect("passthrough"),
        StreamJsonDialect,
        lambda: StreamJsonDialect(partial_messages=True),
    ],
    ids=["awp-jsonl", "passthrough", "stream-json", "stream-json-partial"],
)
def test_builtin_dialects_pass(factory: Any, all_capture_objects: list[Any]) -> None:
    check_dialect(factory, samples=all_capture_objects)


def test_a_dialect_instance_is_accepted() -> None:
    check_dialect(AwpJsonlDialect())


# -- broken dialects: each must fail with a message that says what is wrong ------------------


class _Base(AwpJsonlDialect):
    host_cls: type[HostCodec] = AwpHostCodec
    agent_cls: type[AgentCodec] = AwpAgentCodec

    def __init__(self) -> None:
        super().__init__("broken")

    def host_codec(self) -> Any:
        return self.host_cls()

    def agent_codec(self) -> Any:
        return self.agent_cls()


class _RaisingHost(AwpHostCodec):
    def decode(self, obj: Any) -> Sequence[Event]:
        if isinstance(obj, dict) and obj.get("type") == "result":
            return (TextDelta(text=obj["result"]),)  # KeyError when result is missing
        return super().decode(obj)


class _NotEvents(AwpHostCodec):
    def decode(self, obj: Any) -> Sequence[Event]:
        return [{"type": "text"}] if obj == {} else super().decode(obj)  # type: ignore[list-item]


_SHARED: list[Any] = []


class _SharedState(AwpHostCodec):
    def decode(self, obj: Any) -> Sequence[Event]:
        _SHARED.append(obj)  # class-level state leaks between codecs
        if len(_SHARED) > 3:
            return ()
        return super().decode(obj)


class _NoNewline(AwpHostCodec):
    def encode_turn(self, turn: Turn) -> bytes:
        return super().encode_turn(turn).rstrip(b"\n")


class _AcceptsAnything(AwpHostCodec):
    def encode_turn(self, turn: Turn) -> bytes:
        return b'{"type":"user"}\n'


class _TwoShutdownLines(AwpHostCodec):
    def encode_shutdown(self) -> bytes | None:
        return b'{"type":"shutdown"}\n{"type":"shutdown"}\n'


class _LossyAgent(AwpAgentCodec):
    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        if isinstance(event, TextDelta):
            return []  # drops the reply text
        return super().encode(event)


class _RaisingInput(AwpAgentCodec):
    def decode_input(self, obj: Any) -> AgentInput:
        if not isinstance(obj, dict):
            raise TypeError("expected a dict")  # must return an InputError instead
        return super().decode_input(obj)


def _dialect(host: type[HostCodec] = AwpHostCodec, agent: type[AgentCodec] = AwpAgentCodec) -> Dialect:
    cls = type("Broken", (_Base,), {"host_cls": host, "agent_cls": agent})
    return cls()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("dialect", "message"),
    [
        (_dialect(host=_RaisingHost), "decode raised KeyError"),
        (_dialect(host=_NotEvents), "not an agentrt Event"),
        (_dialect(host=_NoNewline), "must end with a newline"),
        (_dialect(host=_AcceptsAnything), "encode_turn then decode_input gave"),
        (_dialect(host=_TwoShutdownLines), "encode_shutdown must be one line"),
        (_dialect(agent=_LossyAgent), "round trip changed the events"),
        (_dialect(agent=_RaisingInput), "decode_input raised"),
    ],
    ids=["raising-decode", "not-events", "no-newline", "wrong-turn", "two-shutdown", "lossy", "raising-input"],
)
def test_broken_dialects_fail_clearly(dialect: Dialect, message: str) -> None:
    with pytest.raises(AssertionError) as err:
        check_dialect(dialect)
    assert "check_dialect('broken')" in str(err.value)
    assert message in str(err.value)


def test_shared_state_between_codecs_is_caught() -> None:
    _SHARED.clear()
    with pytest.raises(AssertionError, match="decoded the same samples differently"):
        check_dialect(
            _dialect(host=_SharedState), samples=[{"type": "system", "subtype": "init", "session_id": "s"}] * 3
        )


def test_same_codec_twice_is_caught() -> None:
    class Singleton(AwpJsonlDialect):
        codec = AwpHostCodec()

        def host_codec(self) -> AwpHostCodec:
            return self.codec

    with pytest.raises(AssertionError, match="fresh codec per call"):
        check_dialect(Singleton())


def test_unsupported_block_must_raise_the_stable_code() -> None:
    class WrongCode(AwpHostCodec):
        def encode_turn(self, turn: Turn) -> bytes:
            try:
                return super().encode_turn(turn)
            except Exception as exc:
                raise ValueError("nope") from exc

    with pytest.raises(AssertionError, match="not AgentrtError"):
        check_dialect(_dialect(host=WrongCode))


def test_bad_name_and_factory() -> None:
    with pytest.raises(AssertionError, match="not a Dialect"):
        check_dialect(lambda: object())  # type: ignore[arg-type, return-value]
    nameless = AwpJsonlDialect("")
    with pytest.raises(AssertionError, match="non-empty string"):
        check_dialect(nameless)


def test_a_typed_parse_that_changes_events_is_caught() -> None:
    from agentrt_stream_json.codec import StreamJsonHostCodec

    class Sloppy(StreamJsonHostCodec):
        # A careless typed parse in decode_lines: a result line's text changed.
        def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
            out: list[Event] = []
            for line in lines:
                obj = orjson.loads(line) if line.strip() else None
                if isinstance(obj, dict) and obj.get("type") == "result" and "result" in obj:
                    out.extend(self.decode({**obj, "result": "changed"}))
                else:
                    out.extend(super().decode_lines([line], general))
            return out

    class SloppyDialect(StreamJsonDialect):
        def host_codec(self) -> Any:
            return Sloppy()

    with pytest.raises(AssertionError, match="decode_lines changed event"):
        check_dialect(SloppyDialect(partial_messages=True))


class _DropsLastLineOfEachChunk(AwpHostCodec):
    """A careless chunk-at-a-time path: the last line of each chunk is lost."""

    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        return super().decode_lines(lines[:-1], general)


def test_a_sloppy_decode_lines_is_caught() -> None:
    with pytest.raises(AssertionError, match="decode_lines changed event #"):
        check_dialect(_dialect(host=_DropsLastLineOfEachChunk), fuzz=50)


class _InterruptOnEmpty(AwpAgentCodec):
    def decode_input(self, obj: Any) -> AgentInput:
        return Interrupt() if obj == {} else super().decode_input(obj)


def test_an_interrupt_is_an_agent_input() -> None:
    # Interrupt is part of AgentInput (stream-json's SDK interrupt, ACP's session/cancel).
    check_dialect(_dialect(agent=_InterruptOnEmpty), fuzz=20)
