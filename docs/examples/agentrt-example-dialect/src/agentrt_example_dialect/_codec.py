"""The echo-jsonl codecs: a deliberately tiny protocol (see README.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from agentrt import AgentrtError
from agentrt.dialect import AgentCodec, AgentInput, Dialect, HostCodec, InputError, Shutdown, TextBlock, Turn
from agentrt.events import (
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    TextDelta,
    TurnCompleted,
    TurnFailed,
)


class EchoHostCodec(HostCodec):
    """Host side: writes ``say`` lines, reads ``event`` lines."""

    def encode_turn(self, turn: Turn) -> bytes:
        """One ``{"say": [...]}`` line; only text blocks can be carried."""
        texts = []
        for block in turn.content:
            if not isinstance(block, TextBlock):
                # Raise before producing anything: the runtime writes nothing then.
                raise AgentrtError(
                    "unsupported_content_block", f"echo-jsonl carries text only, not {type(block).__name__}"
                )
            texts.append(block.text)
        return orjson.dumps({"say": texts}) + b"\n"

    def encode_shutdown(self) -> bytes | None:
        """``{"bye": true}``."""
        return b'{"bye":true}\n'

    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one output object; never raises, keeps what it does not know."""
        if not isinstance(obj, dict):
            return (Diagnostic(code="unexpected_output_shape", detail="not an object", raw=obj),)
        kind = obj.get("event")
        if kind == "hello" and isinstance(obj.get("session"), str) and obj["session"]:
            return (SessionStarted(session_id=obj["session"], raw=obj),)
        if kind == "text" and isinstance(obj.get("text"), str):
            return (TextDelta(text=obj["text"], raw=obj),)
        if kind == "done":
            return (TurnCompleted(raw=obj),)
        if kind == "error":
            code, message = obj.get("code"), obj.get("message")
            code = code if isinstance(code, str) and code else "echo_error"
            message = message if isinstance(message, str) else ""
            return (TurnFailed(code=code, message=message, raw=obj),)
        return (RawEvent(name=str(kind), raw=obj),)


class EchoAgentCodec(AgentCodec):
    """Agent side: reads ``say``/``bye`` lines, writes ``event`` lines."""

    def decode_input(self, obj: Any) -> AgentInput:
        """A turn, a shutdown, or an input error with a stable code."""
        if isinstance(obj, dict) and obj.get("bye") is True:
            return Shutdown()
        say = obj.get("say") if isinstance(obj, dict) else None
        if not isinstance(say, list) or not say or not all(isinstance(t, str) for t in say):
            return InputError(code="invalid_input_message", detail='expected {"say": [text, ...]}')
        return Turn(content=tuple(TextBlock(text=t) for t in say))

    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """One output object for the events this protocol has, none for the others."""
        if isinstance(event, SessionStarted):
            return ({"event": "hello", "session": event.session_id},)
        if isinstance(event, TextDelta):
            return ({"event": "text", "text": event.text},)
        if isinstance(event, TurnCompleted):
            return ({"event": "done"},)
        if isinstance(event, TurnFailed):
            return ({"event": "error", "code": event.code, "message": event.message},)
        return ()


class EchoJsonlDialect(Dialect):
    """The echo-jsonl dialect: no compatibility flags."""

    name = "echo-jsonl"

    def host_codec(self) -> EchoHostCodec:
        """A fresh host codec."""
        return EchoHostCodec()

    def agent_codec(self) -> EchoAgentCodec:
        """A fresh agent codec."""
        return EchoAgentCodec()
