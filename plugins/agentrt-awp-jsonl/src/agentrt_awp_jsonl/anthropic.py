"""The Anthropic message wire shapes, shared by the awp-jsonl and stream-json dialects.

Both dialects speak the Anthropic Messages API's shapes: the same user line
(content blocks), the same ``tool_use`` / ``tool_result`` blocks, the same
``usage`` object, the same raw streaming events (bare in awp-jsonl, wrapped in
a ``stream_event`` envelope in stream-json), and the same ``result`` line with
its failure codes.  This module holds those shapes once, as pure functions and
typed structs; each codec composes them with its own rules.  It has no state
and no I/O: a codec never shares state with another through it.

* **input** (host encodes, agent decodes): :func:`encode_user_line`,
  :func:`encode_blocks`, :func:`decode_user_input`, :data:`SHUTDOWN_LINE`;
* **output objects** (agent encodes): :func:`init_object`,
  :func:`tool_use_block`, :func:`tool_result_object`;
* **output decoding** (host side): :func:`session_started`,
  :func:`tool_use_event`, :func:`tool_results`, :func:`usage_of`,
  :func:`not_an_object`, :func:`untyped`, :func:`shape_error`;
* **failures**: :func:`is_stable_code`, :func:`failure_code`,
  :func:`failure_message`;
* **typed deltas**: the msgspec structs of a ``content_block_delta`` event
  (:class:`BlockDelta` and its delta bodies), and :data:`decode_block_delta`
  with :data:`BLOCK_DELTA_PREFIX` (the parse of a bare delta line, for a
  codec's ``decode_lines``).

Why typed deltas: most of a streaming reply's lines are content-block deltas.
Parsing one into dicts builds two dicts and several strings, of which the
decoder reads two values; msgspec decodes the same line straight into small
structs and skips (but still validates) every field it does not need, in
about half the time.  The event then carries the line itself as ``raw``
(bytes), and :attr:`agentrt.events.Event.raw` builds the dict only if someone
reads it.  Exactness: a line is taken only when msgspec accepts it whole;
anything else is parsed by orjson as usual.  msgspec's validation of skipped
values is as strict as orjson's, except that it does not check UTF-8 inside
skipped strings; the framing repairs such a line (U+FFFD) and parses it, so
the events are the same either way, and ``Event.raw`` applies the same repair.
The structs are not tracked by the garbage collector (they hold only strings,
numbers and each other, so no cycle can form).  The equivalence is a clause of
``check_dialect`` and a property test (tests/dialects).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Union

import msgspec
import orjson

from agentrt.dialect import (
    AgentInput,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    InputError,
    Shutdown,
    TextBlock,
    Turn,
)
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic, Event, RawEvent, SessionStarted, ToolResult, ToolUse, Usage
from agentrt.labels import tool_label

__all__ = [
    "SHUTDOWN_LINE",
    "encode_blocks",
    "encode_user_line",
    "decode_user_input",
    "init_object",
    "tool_use_block",
    "tool_result_object",
    "session_started",
    "tool_use_event",
    "tool_results",
    "usage_of",
    "dispatch",
    "not_an_object",
    "untyped",
    "shape_error",
    "is_stable_code",
    "failure_code",
    "failure_message",
    "TextDeltaBody",
    "ThinkingDeltaBody",
    "JsonDelta",
    "SignatureDelta",
    "BlockDelta",
    "Int64",
    "BLOCK_DELTA_PREFIX",
    "decode_block_delta",
]

#: The graceful-shutdown line of the AWP contract (both dialects read and write it).
SHUTDOWN_LINE = b'{"type":"shutdown"}\n'

_CODE = re.compile(r"^[a-z0-9_:-]{1,160}$", re.IGNORECASE)
_SUBTYPE = re.compile(r"^[A-Za-z0-9_]{1,64}$")


# -- input: the user line -----------------------------------------------------------


def encode_blocks(turn: Turn) -> list[dict[str, Any]]:
    """The content blocks for ``turn``; ``unsupported_content_block`` for any other block."""
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


# -- output objects (agent side) ------------------------------------------------------


def init_object(event: SessionStarted) -> dict[str, Any]:
    """The ``system/init`` object announcing ``event``'s session (``cwd``/``tools`` from its raw mapping)."""
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


# -- output decoding (host side) --------------------------------------------------------


def not_an_object(obj: Any) -> tuple[Event, ...]:
    """The diagnostic for an output line that is JSON but not an object."""
    detail = f"output line is a JSON {type(obj).__name__}, not an object"
    return (Diagnostic(code="unexpected_output_shape", detail=detail, raw=obj),)


def untyped(kind: Any, obj: Any) -> tuple[Event, ...]:
    """Events for an object whose ``type`` (``kind``) no handler takes: a raw event, or a diagnostic without a type."""
    if type(kind) is not str:
        return (Diagnostic(code="unexpected_output_shape", detail="object without a string type", raw=obj),)
    return (RawEvent(name=kind, raw=obj),)


def shape_error(kind: Any, exc: Exception, obj: Any) -> tuple[Event, ...]:
    """The diagnostic for a handler that met a shape no branch foresaw (the object is kept)."""
    return (Diagnostic(code="unexpected_output_shape", detail=f"{kind}: {type(exc).__name__}", raw=obj),)


def dispatch(handlers: Mapping[str, Callable[[dict[str, Any]], Sequence[Event]]], obj: Any) -> Sequence[Event]:
    """Events for one parsed output object by its ``type``: the handler's, else a raw event or a diagnostic.

    Never raises: a handler that meets a shape no branch foresaw gives a
    :func:`shape_error` diagnostic that keeps the object.
    """
    if type(obj) is not dict:
        return not_an_object(obj)
    kind = obj.get("type")
    handler = handlers.get(kind) if type(kind) is str else None
    if handler is None:
        return untyped(kind, obj)
    try:
        return handler(obj)
    except Exception as exc:  # a shape no branch foresaw: say so, keep the object
        return shape_error(kind, exc, obj)


def session_started(obj: Mapping[str, Any]) -> SessionStarted | Diagnostic:
    """The event of a ``system/init`` object: :class:`SessionStarted`, or a diagnostic without a session id."""
    session_id = obj.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return Diagnostic(code="unexpected_output_shape", detail="system/init without a session_id", raw=obj)
    # The shape of the id is the conversation's business (it owns the rule).
    model = obj.get("model")
    return SessionStarted(session_id=session_id, model=model if isinstance(model, str) else None, raw=obj)


def tool_use_event(obj: Any, block: Mapping[str, Any]) -> ToolUse:
    """The :class:`ToolUse` of a complete ``tool_use`` block (``obj`` is its line, kept as ``raw``)."""
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


def tool_results(obj: Mapping[str, Any]) -> Sequence[Event]:
    """The events of a ``user`` output object: one :class:`ToolResult` per block, else a raw event."""
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


def usage_of(value: Any) -> Usage | None:
    """The :class:`Usage` of a ``usage`` object, ``None`` when it is not one."""
    return Usage.from_mapping(value) if isinstance(value, Mapping) else None


# -- failures ----------------------------------------------------------------------------


def is_stable_code(value: Any) -> bool:
    """True when ``value`` is a string shaped like a stable error code (``^[a-z0-9_:-]{1,160}$``, any case)."""
    return isinstance(value, str) and _CODE.match(value) is not None


def failure_code(obj: Mapping[str, Any]) -> str:
    """The code of a failed ``result``: a code-shaped ``result``, else ``cc_<subtype>``, else ``cc_error``."""
    result = obj.get("result")
    if is_stable_code(result):
        return str(result)
    subtype = obj.get("subtype")
    if isinstance(subtype, str) and _SUBTYPE.match(subtype):
        return f"cc_{subtype}"
    return "cc_error"


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


# -- typed deltas ------------------------------------------------------------------------


class TextDeltaBody(msgspec.Struct, tag="text_delta", tag_field="type", gc=False):
    """``{"type":"text_delta","text":...}``."""

    text: str


class ThinkingDeltaBody(msgspec.Struct, tag="thinking_delta", tag_field="type", gc=False):
    """``{"type":"thinking_delta","thinking":...}``."""

    thinking: str


class JsonDelta(msgspec.Struct, tag="input_json_delta", tag_field="type", gc=False):
    """``{"type":"input_json_delta","partial_json":...}``: a piece of a streamed tool input."""

    partial_json: str


class SignatureDelta(msgspec.Struct, tag="signature_delta", tag_field="type", gc=False):
    """``{"type":"signature_delta",...}``: carries nothing the events use."""


#: An integer the framing reads as the same ``int``: msgspec reads any integer as an
#: ``int``, the framing one past 64 bits as a double (as JSON.parse does).  A typed field
#: takes a signed 64-bit one (msgspec bounds no wider); a line with another, however
#: rare, goes to the general path.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class BlockDelta(msgspec.Struct, tag="content_block_delta", tag_field="type", gc=False):
    """The raw API event ``content_block_delta``."""

    index: Int64
    delta: Union[TextDeltaBody, ThinkingDeltaBody, JsonDelta, SignatureDelta]


#: How a bare content-block delta line starts, as the agent writes it (these keys first, as
#: every awp-jsonl CLI seen does); a line that starts otherwise is parsed generically without trying.
BLOCK_DELTA_PREFIX = b'{"type":"content_block_delta",'

#: A bare content-block delta line into a :class:`BlockDelta`; raises ``msgspec.DecodeError`` for any other line.
decode_block_delta: Callable[[bytes], BlockDelta] = msgspec.json.Decoder(BlockDelta).decode
