"""The awp-jsonl codecs (AWP agent CLI protocol), both sides of the wire.

Host side (:class:`AwpHostCodec`) follows the original AWP host's translation
table; agent side (:class:`AwpAgentCodec`) prints what the reference agent CLI
prints.  The stream-json dialect builds on these classes (same user line, a
superset of the output objects), which is why this module is importable.

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

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from agentrt.dialect import (
    AgentCodec,
    AgentInput,
    ContentBlock,
    Dialect,
    DocumentBlock,
    HostCodec,
    ImageBlock,
    InputError,
    Shutdown,
    TextBlock,
    Turn,
    make_text_delta,
)
from agentrt.errors import AgentrtError
from agentrt.events import (
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.labels import tool_label

from ._typed import TextDeltaBody, ThinkingDeltaBody, load_line

__all__ = [
    "AwpJsonlDialect",
    "AwpHostCodec",
    "AwpAgentCodec",
    "encode_user_line",
    "encode_blocks",
    "decode_user_input",
    "is_stable_code",
    "failure_message",
    "init_object",
    "tool_use_block",
    "tool_result_object",
    "SHUTDOWN_LINE",
]

#: The graceful-shutdown line of the contract.
SHUTDOWN_LINE = b'{"type":"shutdown"}\n'

_CODE = re.compile(r"^[a-z0-9_:-]{1,160}$", re.IGNORECASE)
_SUBTYPE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_NO_EVENTS: tuple[Event, ...] = ()


def is_stable_code(value: Any) -> bool:
    """True when ``value`` is a string shaped like a stable error code."""
    return isinstance(value, str) and _CODE.match(value) is not None


# -- input (host encodes, agent decodes): identical for awp-jsonl and stream-json --


def encode_blocks(turn: Turn) -> list[dict[str, Any]]:
    """The contract's content blocks for ``turn``; ``unsupported_content_block`` otherwise."""
    if not isinstance(turn, Turn):
        raise AgentrtError("unsupported_content_block", f"not a Turn: {type(turn).__name__}")
    blocks: list[dict[str, Any]] = []
    for block in turn.content:
        if type(block) is TextBlock:
            blocks.append({"type": "text", "text": block.text})
        elif type(block) is ImageBlock or type(block) is DocumentBlock:
            kind = "image" if type(block) is ImageBlock else "document"
            blocks.append(
                {
                    "type": kind,
                    "source": {"type": "base64", "media_type": block.media_type, "data": block.data},
                }
            )
        else:
            raise AgentrtError("unsupported_content_block", f"this dialect cannot carry a {type(block).__name__}")
    return blocks


def encode_user_line(turn: Turn) -> bytes:
    """The one ``{"type":"user",...}`` line for ``turn``, ``\\n``-terminated.

    Raises before producing anything, so a refused turn writes nothing.
    """
    blocks = encode_blocks(turn)
    try:
        body = orjson.dumps({"type": "user", "message": {"role": "user", "content": blocks}})
    except TypeError as exc:  # orjson refuses lone surrogates and non-str values
        raise AgentrtError("unsupported_content_block", f"content is not encodable: {exc}") from None
    return body + b"\n"


def _decode_source(block: Mapping[str, Any]) -> tuple[str, str] | None:
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return None
    media_type, data = source.get("media_type"), source.get("data")
    if isinstance(media_type, str) and isinstance(data, str):
        return media_type, data
    return None


def decode_user_input(obj: Any) -> AgentInput:
    """Read one input object as the reference agent CLI does (§B of the behaviours).

    ``{"type":"shutdown"}`` → :class:`Shutdown`; a user line → :class:`Turn`;
    anything else → :class:`InputError` with ``invalid_input_message``,
    ``invalid_input_content`` or ``empty_input_content``.  Unknown blocks are
    dropped, string content is one text block.
    """
    if not isinstance(obj, Mapping):
        return InputError(code="invalid_input_message", detail="input line is not a JSON object")
    kind = obj.get("type")
    if kind == "shutdown":
        return Shutdown()
    message = obj.get("message")
    if kind != "user" or not isinstance(message, Mapping) or message.get("role") != "user":
        return InputError(code="invalid_input_message", detail="expected a user message")
    content = message.get("content")
    if isinstance(content, str):
        return Turn.text(content)
    if not isinstance(content, list):
        return InputError(code="invalid_input_content", detail="content must be a string or an array")
    blocks: list[ContentBlock] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        btype = block.get("type")
        if btype == "text":
            text = block.get("text")
            if isinstance(text, str):
                blocks.append(TextBlock(text=text))
        elif btype == "image" or btype == "document":
            source = _decode_source(block)
            if source is not None:
                cls = ImageBlock if btype == "image" else DocumentBlock
                blocks.append(cls(media_type=source[0], data=source[1]))
    if not blocks:
        return InputError(code="empty_input_content", detail="no supported content block")
    return Turn(content=tuple(blocks))


# -- host side ------------------------------------------------------------------


def _int_usage(value: Any) -> Usage | None:
    return Usage.from_mapping(value) if isinstance(value, Mapping) else None


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
        # Typed first parse of delta lines (see _typed).
        self.line_loader = load_line
        self._dispatch: dict[str, Callable[[dict[str, Any]], Sequence[Event]]] = {
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

    def decode_batch(self, objs: Sequence[Any]) -> list[Event]:
        """Events for one chunk's objects: text-delta lines inlined, the rest via :meth:`decode`.

        Same events as calling :meth:`decode` per object, without a call and a
        tuple per text delta (most lines of a streaming reply).
        """
        out: list[Event] = []
        append = out.append
        decode = self.decode
        make = make_text_delta
        for obj in objs:
            if type(obj) is tuple:  # a delta line line_loader decoded typed
                typed, line = obj
                delta = typed.delta
                if type(delta) is TextDeltaBody:
                    if delta.text:
                        append(make(delta.text, typed.index, line))
                elif type(delta) is ThinkingDeltaBody and delta.thinking:
                    append(ThinkingDelta(text=delta.thinking, index=typed.index, raw=line))
                continue  # input_json_delta and signature_delta give no event
            # A non-object raises TypeError on a string key, a missing key
            # KeyError: either way the line takes the general path.
            try:
                if obj["type"] == "content_block_delta":
                    delta = obj["delta"]
                    if delta["type"] == "text_delta":
                        text = delta["text"]
                        index = obj["index"]
                        if type(text) is str and text and type(index) is int:
                            append(make(text, index, obj))
                            continue
            except (KeyError, TypeError):
                pass
            out.extend(decode(obj))
        return out

    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one output object (or one line :attr:`line_loader` decoded typed); never raises."""
        if type(obj) is tuple:
            return self.decode_batch((obj,))
        if type(obj) is not dict:
            return (
                Diagnostic(
                    code="unexpected_output_shape",
                    detail=f"output line is a JSON {type(obj).__name__}, not an object",
                    raw=obj,
                ),
            )
        kind = obj.get("type")
        handler = self._dispatch.get(kind) if type(kind) is str else None
        if handler is None:
            if type(kind) is not str:
                return (Diagnostic(code="unexpected_output_shape", detail="object without a string type", raw=obj),)
            return (RawEvent(name=kind, raw=obj),)
        try:
            return handler(obj)
        except Exception as exc:  # a shape no branch foresaw: say so, keep the object
            return (Diagnostic(code="unexpected_output_shape", detail=f"{kind}: {type(exc).__name__}", raw=obj),)

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
        session_id = obj.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            return (Diagnostic(code="unexpected_output_shape", detail="system/init without a session_id", raw=obj),)
        # The shape of the id is the conversation's business (it owns the rule).
        self.session_id = session_id
        return (SessionStarted(session_id=session_id, model=_str_or_none(obj.get("model")), raw=obj),)

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
                out.append(self._tool_use(obj, block))
            elif btype == "thinking":
                thinking = block.get("thinking")
                if isinstance(thinking, str) and thinking:
                    out.append(ThinkingDelta(text=thinking, index=index, raw=obj))
            else:
                out.append(RawEvent(name=f"assistant/{btype}" if isinstance(btype, str) else "assistant", raw=obj))
        return out

    def _tool_use(self, obj: dict[str, Any], block: Mapping[str, Any]) -> ToolUse:
        name = block.get("name")
        name = name if isinstance(name, str) and name else "tool"
        tool_input = block.get("input")
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        tool_id = block.get("id")
        return ToolUse(
            id=tool_id if isinstance(tool_id, str) else "",
            name=name,
            input=tool_input,
            summary=tool_label(name, tool_input),
            raw=obj,
        )

    def _assistant(self, obj: dict[str, Any]) -> Sequence[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        out = self._content_events(obj, content)
        return out if out else (RawEvent(name="assistant", raw=obj),)

    def _user(self, obj: dict[str, Any]) -> Sequence[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        out: list[Event] = []
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    tool_use_id = block.get("tool_use_id")
                    out.append(
                        ToolResult(
                            tool_use_id=tool_use_id if isinstance(tool_use_id, str) else "",
                            content=block.get("content"),
                            is_error=block.get("is_error") is True,
                            raw=obj,
                        )
                    )
        return out if out else (RawEvent(name="user", raw=obj),)

    def _result(self, obj: dict[str, Any]) -> Sequence[Event]:
        usage = _int_usage(obj.get("usage"))
        self._pending_usage = None
        session_id = _str_or_none(obj.get("session_id"))
        if obj.get("is_error") is True:
            return (TurnFailed(code=self._failure_code(obj), message=failure_message(obj), usage=usage, raw=obj),)
        return (TurnCompleted(session_id=session_id, usage=usage, result=_str_or_none(obj.get("result")), raw=obj),)

    def _failure_code(self, obj: Mapping[str, Any]) -> str:
        result = obj.get("result")
        if is_stable_code(result):
            return str(result)
        subtype = obj.get("subtype")
        if isinstance(subtype, str) and _SUBTYPE.match(subtype):
            return f"cc_{subtype}"
        return "cc_error"

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
        usage = _int_usage(obj.get("usage"))
        if usage is not None:
            self._pending_usage = usage
        return _NO_EVENTS

    def _message_stop(self, obj: dict[str, Any]) -> Sequence[Event]:
        usage, self._pending_usage = self._pending_usage, None
        return (TurnCompleted(session_id=self.session_id, usage=usage, raw=obj),)


def failure_message(obj: Mapping[str, Any]) -> str:
    """The human message of a failed ``result`` object."""
    # Human text in ``result`` wins; a code-shaped ``result`` may come with the
    # human message in ``errors`` (the SDK's shape, and what agentrt prints).
    result = obj.get("result")
    if isinstance(result, str) and not is_stable_code(result):
        return result
    errors = obj.get("errors")
    if isinstance(errors, list):
        return "\n".join(e for e in errors if isinstance(e, str))
    return result if isinstance(result, str) else ""


def _rate_detail(info: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


# -- agent side -----------------------------------------------------------------


class AwpAgentCodec(AgentCodec):
    """Agent side of awp-jsonl: what the reference agent CLI prints.

    Text deltas are framed as raw ``content_block_start`` / ``_delta`` /
    ``_stop`` events: a block is opened before its first delta and closed
    before any other event (and at the terminal event).  Extra ``system/init``
    keys (``tools``, ``cwd``) come from the ``SessionStarted`` event's ``raw``
    mapping when it has them.
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._open: tuple[str, int] | None = None  # (block kind, index) of the open block

    def decode_input(self, obj: Any) -> AgentInput:
        """A :class:`Turn`, :class:`Shutdown` or :class:`InputError` for one input object."""
        return decode_user_input(obj)

    def _close(self, out: list[dict[str, Any]]) -> None:
        if self._open is not None:
            out.append({"type": "content_block_stop", "index": self._open[1]})
            self._open = None

    def _delta(self, kind: str, index: int, delta: dict[str, Any], out: list[dict[str, Any]]) -> None:
        if self._open != (kind, index):
            self._close(out)
            block: dict[str, Any] = (
                {"type": "text", "text": ""} if kind == "text" else {"type": "thinking", "thinking": ""}
            )
            out.append({"type": "content_block_start", "index": index, "content_block": block})
            self._open = (kind, index)
        out.append({"type": "content_block_delta", "index": index, "delta": delta})

    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """Output objects for one event (see the class docstring)."""
        out: list[dict[str, Any]] = []
        if isinstance(event, TextDelta):
            self._delta("text", event.index, {"type": "text_delta", "text": event.text}, out)
            return out
        if isinstance(event, ThinkingDelta):
            self._delta("thinking", event.index, {"type": "thinking_delta", "thinking": event.text}, out)
            return out
        self._close(out)
        if isinstance(event, SessionStarted):
            self.session_id = event.session_id
            out.append(init_object(event))
        elif isinstance(event, ToolUse):
            out.append(self._assistant_object(tool_use_block(event)))
        elif isinstance(event, ToolResult):
            out.append(tool_result_object(event, self.session_id))
        elif isinstance(event, TurnCompleted):
            out.append(self._success(event))
        elif isinstance(event, TurnFailed):
            out.append(self._failure(event))
        return out

    def _assistant_object(self, block: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "assistant", "message": {"role": "assistant", "content": [block]}}
        if self.session_id is not None:
            obj["session_id"] = self.session_id
        return obj

    def _success(self, event: TurnCompleted) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "result", "subtype": "success", "is_error": False}
        session_id = event.session_id or self.session_id
        if session_id is not None:
            obj["session_id"] = session_id
        if event.result is not None:
            obj["result"] = event.result
        if event.usage is not None:
            obj["usage"] = event.usage.to_dict()
        return obj

    def _failure(self, event: TurnFailed) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "result", "subtype": "error", "is_error": True}
        if self.session_id is not None:
            obj["session_id"] = self.session_id
        obj["result"] = event.code
        obj["errors"] = [event.message] if event.message else []
        if event.usage is not None:
            obj["usage"] = event.usage.to_dict()
        return obj


def init_object(event: SessionStarted) -> dict[str, Any]:
    """The ``system/init`` object announcing ``event``'s session."""
    obj: dict[str, Any] = {"type": "system", "subtype": "init", "session_id": event.session_id}
    if event.model is not None:
        obj["model"] = event.model
    extra = event.raw if isinstance(event.raw, Mapping) else {}
    for key in ("cwd", "tools"):
        if key in extra:
            obj[key] = extra[key]
    return obj


def tool_use_block(event: ToolUse) -> dict[str, Any]:
    """The ``tool_use`` content block of ``event``."""
    return {"type": "tool_use", "id": event.id, "name": event.name, "input": dict(event.input)}


def tool_result_object(event: ToolResult, session_id: str | None) -> dict[str, Any]:
    """A ``user`` object carrying ``event`` as a ``tool_result`` block."""
    obj: dict[str, Any] = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": event.tool_use_id,
                    "content": event.content,
                    "is_error": event.is_error,
                }
            ],
        },
    }
    if session_id is not None:
        obj["session_id"] = session_id
    return obj


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
