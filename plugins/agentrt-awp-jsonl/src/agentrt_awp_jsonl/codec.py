"""The awp-jsonl codecs (AWP agent CLI protocol), both sides of the wire.

Host side (:class:`AwpHostCodec`) follows the original AWP host's translation
table; agent side (:class:`AwpAgentCodec`) prints what the reference agent CLI
prints.  The wire shapes it shares with stream-json (the user line, tool
blocks, usage, failure codes, the typed deltas) are in
:mod:`agentrt_awp_jsonl.anthropic`.

Decisions worth knowing (docs/dialects.md has the full table):

* a raw ``content_block_start`` of a ``tool_use`` block gives a
  :class:`~agentrt.events.ToolUse` with an empty input and a label computed
  from the name alone, as the AWP host renders tool progress from the start;
  the ``input_json_delta`` pieces that follow are not rendered and no second
  ``ToolUse`` is emitted at ``content_block_stop``;
* ``message_stop`` ends the turn (``TurnCompleted`` with the usage of the last
  ``message_delta``), since the contract lets raw streams finish with it;
* a failed ``result`` keeps its ``result`` string as the code when it looks
  like a stable code (``^[a-z0-9_:-]{1,160}$``, any case), else
  ``cc_<subtype>``, else ``cc_error``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from agentrt.dialect import Dialect, HostCodec, Turn, text_delta_slots
from agentrt.events import (
    Event,
    RawEvent,
    SessionStarted,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.labels import tool_label

from ._agent import AwpAgentCodec
from .anthropic import (
    BLOCK_DELTA_PREFIX,
    SHUTDOWN_LINE,
    TextDeltaBody,
    ThinkingDeltaBody,
    decode_block_delta,
    dispatch,
    encode_user_line,
    failure_code,
    failure_message,
    session_started,
    tool_results,
    tool_use_event,
    usage_of,
)

__all__ = ["AwpJsonlDialect", "AwpHostCodec", "AwpAgentCodec"]

_NO_EVENTS: tuple[Event, ...] = ()


# -- host side ------------------------------------------------------------------


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class AwpHostCodec(HostCodec):
    """Host side of awp-jsonl: decodes a CLI's output objects into events.

    One instance per conversation; it remembers the session id (for a raw
    stream's ``message_stop``) and the usage of the last ``message_delta``.
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._pending_usage: Usage | None = None

    @functools.cached_property
    def _dispatch(self) -> dict[str, Callable[[dict[str, Any]], Sequence[Event]]]:
        # Built on the first object decoded, not per codec: an idle conversation
        # keeps no eleven bound methods (about 1.3 KiB and a cycle each).
        return {
            "system": self._system,
            "assistant": self._assistant,
            "user": self._user,
            "result": self._result,
            "rate_limit_event": self._rate_limit,
            "message_start": self._raw_named,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._nothing,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
        }

    # HostCodec API
    def encode_turn(self, turn: Turn) -> bytes:
        """The user line of the contract (text, image and document blocks)."""
        return encode_user_line(turn)

    def encode_shutdown(self) -> bytes | None:
        """``{"type":"shutdown"}``."""
        return SHUTDOWN_LINE

    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        """Events for one chunk's lines, parsed and decoded in one loop (the host path's chunk-at-a-time path).

        A bare delta line msgspec takes is decoded from its struct at once,
        text deltas inline; every other line goes to ``general`` (the
        framing's parse, then :meth:`decode`).  Same events as :meth:`decode`
        on each line's plain parse.
        """
        out: list[Event] = []
        append = out.append
        prefix = BLOCK_DELTA_PREFIX
        decode_delta = decode_block_delta
        error = msgspec.DecodeError  # ValidationError is a subclass
        new, set_text, set_index, set_raw = text_delta_slots()
        for line in lines:
            if line.startswith(prefix):
                try:
                    typed = decode_delta(line)
                except (error, RecursionError):  # msgspec's nesting limit: orjson refuses such a line too
                    pass
                else:
                    delta = typed.delta
                    if type(delta) is TextDeltaBody:
                        text = delta.text
                        if text:
                            event = new()
                            set_text(event, text)
                            set_index(event, typed.index)
                            set_raw(event, line)
                            append(event)
                    elif type(delta) is ThinkingDeltaBody and delta.thinking:
                        append(ThinkingDelta(text=delta.thinking, index=typed.index, raw=line))
                    continue  # input_json_delta and signature_delta give no event
            out.extend(general(line))
        return out

    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one parsed output object; never raises."""
        return dispatch(self._dispatch, obj)

    # handlers
    def _nothing(self, obj: dict[str, Any]) -> Sequence[Event]:
        return _NO_EVENTS

    def _raw_named(self, obj: dict[str, Any]) -> Sequence[Event]:
        return (RawEvent(name=obj["type"], raw=obj),)

    def _system(self, obj: dict[str, Any]) -> Sequence[Event]:
        subtype = obj.get("subtype")
        if subtype == "init":
            return self._init(obj)
        return (RawEvent(name=f"system/{subtype}" if isinstance(subtype, str) else "system", raw=obj),)

    def _init(self, obj: dict[str, Any]) -> Sequence[Event]:
        event = session_started(obj)
        if type(event) is SessionStarted:
            self.session_id = event.session_id
        return (event,)

    def _content_events(self, obj: dict[str, Any], content: Any) -> list[Event]:
        if isinstance(content, str):
            return [TextDelta(text=content, raw=obj)] if content else []
        out: list[Event] = []
        if not isinstance(content, list):
            return out
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                text = block.get("text")
                if isinstance(text, str) and text:
                    out.append(TextDelta(text=text, index=index, raw=obj))
            elif btype == "tool_use":
                out.append(tool_use_event(obj, block))
            elif btype == "thinking":
                thinking = block.get("thinking")
                if isinstance(thinking, str) and thinking:
                    out.append(ThinkingDelta(text=thinking, index=index, raw=obj))
            else:
                out.append(RawEvent(name=f"assistant/{btype}" if isinstance(btype, str) else "assistant", raw=obj))
        return out

    def _assistant(self, obj: dict[str, Any]) -> Sequence[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        out = self._content_events(obj, content)
        return out if out else (RawEvent(name="assistant", raw=obj),)

    def _user(self, obj: dict[str, Any]) -> Sequence[Event]:
        return tool_results(obj)

    def _result(self, obj: dict[str, Any]) -> Sequence[Event]:
        usage = usage_of(obj.get("usage"))
        self._pending_usage = None
        session_id = _str_or_none(obj.get("session_id"))
        if obj.get("is_error") is True:
            return (TurnFailed(code=failure_code(obj), message=failure_message(obj), usage=usage, raw=obj),)
        return (TurnCompleted(session_id=session_id, usage=usage, result=_str_or_none(obj.get("result")), raw=obj),)

    def _rate_limit(self, obj: dict[str, Any]) -> Sequence[Event]:
        info = obj.get("rate_limit_info")
        status = info.get("status") if isinstance(info, dict) else None
        if isinstance(info, dict) and isinstance(status, str) and status and status != "allowed":
            return (Status(kind="rate_limit", label="rate_limited", detail=_rate_detail(info), raw=obj),)
        return (RawEvent(name="rate_limit_event", raw=obj),)

    def _block_start(self, obj: dict[str, Any]) -> Sequence[Event]:
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            name = block.get("name")
            name = name if isinstance(name, str) and name else "tool"
            tool_id = block.get("id")
            # Rendered from the start, input not yet known: the label is the name's.
            return (
                ToolUse(
                    id=tool_id if isinstance(tool_id, str) else "",
                    name=name,
                    input={},
                    summary=tool_label(name, None),
                    raw=obj,
                ),
            )
        return _NO_EVENTS

    def _block_delta(self, obj: dict[str, Any]) -> Sequence[Event]:
        delta = obj.get("delta")
        if type(delta) is not dict:
            return (RawEvent(name="content_block_delta", raw=obj),)
        dtype = delta.get("type")
        index = obj.get("index")
        if type(index) is not int:
            index = 0
        if dtype == "text_delta":
            text = delta.get("text")
            if type(text) is str:
                return (TextDelta(text=text, index=index, raw=obj),) if text else _NO_EVENTS
        elif dtype == "thinking_delta":
            text = delta.get("thinking")
            if type(text) is str:
                return (ThinkingDelta(text=text, index=index, raw=obj),) if text else _NO_EVENTS
        elif dtype == "input_json_delta" or dtype == "signature_delta":
            return _NO_EVENTS
        return (RawEvent(name="content_block_delta", raw=obj),)

    def _message_delta(self, obj: dict[str, Any]) -> Sequence[Event]:
        usage = usage_of(obj.get("usage"))
        if usage is not None:
            self._pending_usage = usage
        return _NO_EVENTS

    def _message_stop(self, obj: dict[str, Any]) -> Sequence[Event]:
        usage, self._pending_usage = self._pending_usage, None
        return (TurnCompleted(session_id=self.session_id, usage=usage, raw=obj),)


def _rate_detail(info: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


class AwpJsonlDialect(Dialect):
    """The AWP agent CLI protocol; ``passthrough`` is the same dialect by another name."""

    compat_args: tuple[str, ...] = ()

    def __init__(self, name: str = "awp-jsonl") -> None:
        self.name = name

    def host_codec(self) -> AwpHostCodec:
        """A fresh host codec."""
        return AwpHostCodec()

    def agent_codec(self) -> AwpAgentCodec:
        """A fresh agent codec."""
        return AwpAgentCodec()
