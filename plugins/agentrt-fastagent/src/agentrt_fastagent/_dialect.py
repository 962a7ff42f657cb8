"""The ``fastagent`` dialect: FastAgent's lifecycle JSONL, both ways.

Host side, each parsed stdout object becomes one
:class:`~agentrt.events.Lifecycle` event when it passes the schema, else a
:class:`~agentrt.events.Diagnostic` with code ``fastagent_invalid_line`` (the
supervisor treats that as fatal for the process).  Agent side, Lifecycle
events are encoded back into lines, so fixtures and round-trip tests speak the
same dialect.  FastAgent reads no stdin, so there are no turns to encode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.dialect import AgentCodec, AgentInput, Dialect, HostCodec, InputError, Turn
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic, Event, Lifecycle

from ._schema import validate_line

__all__ = ["FastAgentDialect", "FastAgentHostCodec", "FastAgentAgentCodec", "INVALID_LINE"]

#: Diagnostic code of a stdout line that fails the schema.
INVALID_LINE = "fastagent_invalid_line"


class FastAgentHostCodec(HostCodec):
    """Decodes FastAgent stdout objects into Lifecycle events."""

    def encode_turn(self, turn: Turn) -> bytes:
        """FastAgent takes no turns on stdin: always ``unsupported_content_block``."""
        raise AgentrtError("unsupported_content_block", "the fastagent dialect has no stdin turns (stdin is closed)")

    def decode(self, obj: Any) -> Sequence[Event]:
        """One Lifecycle event, or a ``fastagent_invalid_line`` diagnostic."""
        clean, reason = validate_line(obj)
        if clean is None:
            return (Diagnostic(code=INVALID_LINE, detail=reason, raw=obj),)
        return (
            Lifecycle(
                kind=clean["type"],
                message=clean["message"],
                pid=clean["pid"],
                timestamp=clean["timestamp"],
                data=clean["data"],
                agent_id=clean.get("agentId"),
                raw=obj,
            ),
        )


class FastAgentAgentCodec(AgentCodec):
    """Encodes Lifecycle events as FastAgent lines (the agent side)."""

    def decode_input(self, obj: Any) -> AgentInput:
        """FastAgent reads nothing from stdin; every input is refused."""
        return InputError(code="unsupported_input", detail="the fastagent dialect reads no stdin")

    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """One line for a Lifecycle event; nothing for any other event.

        Raise ``invalid_lifecycle_event`` when the event could not pass the
        schema itself (an encoder must not print what its decoder refuses).
        """
        if not isinstance(event, Lifecycle):
            return ()
        line: dict[str, Any] = {
            "type": event.kind,
            "timestamp": event.timestamp,
            "pid": event.pid,
            "message": event.message,
            "data": dict(event.data),
        }
        if event.agent_id is not None:
            line["agentId"] = event.agent_id
        _, reason = validate_line(line)
        if reason:
            raise AgentrtError("invalid_lifecycle_event", reason)
        return (line,)


class FastAgentDialect(Dialect):
    """The ``fastagent`` dialect (FastAgent ``--output jsonl``)."""

    name = "fastagent"

    def host_codec(self) -> HostCodec:
        """A fresh host codec."""
        return FastAgentHostCodec()

    def agent_codec(self) -> AgentCodec:
        """A fresh agent codec."""
        return FastAgentAgentCodec()
