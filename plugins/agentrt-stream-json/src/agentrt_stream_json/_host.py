"""Host side of stream-json: decodes the Claude Code CLI's output (see :mod:`agentrt_stream_json.codec`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from agentrt.dialect import HostCodec, JsonFragment, Turn, make_text_delta
from agentrt.errors import AgentrtError
from agentrt.events import (
    ControlRequest,
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
from agentrt.lowlevel import parse_line
from agentrt.permissions import PermissionDecision
from agentrt_awp_jsonl.anthropic import (
    SHUTDOWN_LINE,
    encode_user_line,
    failure_code,
    failure_message,
    is_stable_code,
    not_an_object,
    session_started,
    shape_error,
    tool_results,
    tool_use_event,
    untyped,
)

from ._typed import (
    AssistantLine,
    JsonDelta,
    RateLimitLine,
    ResultLine,
    StreamDelta,
    TextBlock,
    TextDeltaBody,
    ThinkingBlock,
    ThinkingDeltaBody,
    ToolArgs,
    UserLine,
    load_line,
    loads_raw,
)

__all__ = ["StreamJsonHostCodec", "permission_response"]

_NO_EVENTS: tuple[Event, ...] = ()
_UNSET = object()


_SKIP_DETAIL = frozenset({"type", "subtype", "uuid", "session_id"})


def _scalars(obj: Mapping[str, Any], skip: frozenset[str] = _SKIP_DETAIL) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in skip and (v is None or isinstance(v, (str, int, float, bool)))}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def permission_response(decision: PermissionDecision) -> dict[str, Any]:
    """The ``can_use_tool`` answer body for ``decision`` (the Agent SDK's shape).

    ``{"behavior":"allow","updatedInput":...}`` (``updatedInput`` only when the
    policy rewrote the input; :meth:`StreamJsonHostCodec.encode_control_response`
    fills in the original input otherwise) or ``{"behavior":"deny","message":...}``.
    """
    if decision.allow:
        body: dict[str, Any] = {"behavior": "allow"}
        if decision.updated_input is not None:
            body["updatedInput"] = dict(decision.updated_input)
        return body
    return {"behavior": "deny", "message": decision.message}


class StreamJsonHostCodec(HostCodec):
    """Host side of stream-json: decodes the Claude Code CLI's output objects.

    One instance per conversation; it remembers what the current turn streamed
    (to emit only what the complete ``assistant`` lines add) and the tool calls
    already reported.
    """

    def __init__(self) -> None:
        #: The session of the last ``system/init``.
        self.session_id: str | None = None
        self._message_id: Any = None
        # (kind, message id, block index) -> streamed pieces; (kind, message id) -> indices in order
        # (kind, message id) -> {block index: streamed pieces}, blocks in stream order
        self._streamed: dict[tuple[str, Any], dict[int, list[str]]] = {}
        # the text blocks of the message being streamed, cached for the hot path
        self._text_msg: Any = _UNSET
        self._text_blocks: dict[int, list[str]] = {}
        # (message id, block index) -> [tool id, name, input pieces] of a streamed tool_use block
        self._tool_blocks: dict[tuple[Any, int], list[Any]] = {}
        self._tools_emitted: set[str] = set()
        # The fast path's typed first parse of delta lines (see _typed).
        self.line_loader = load_line
        self._dispatch: dict[str, Callable[[dict[str, Any]], Sequence[Event]]] = {
            "system": self._system,
            "assistant": self._assistant,
            "user": tool_results,
            "result": self._result,
            "rate_limit_event": self._rate_limit,
            "stream_event": self._stream_event,
            "control_request": self._control_request,
            # The real CLI wraps raw events in stream_event; accept them bare
            # too, with the same (non-terminal) meaning.
            "message_start": self._bare_raw,
            "content_block_start": self._bare_raw,
            "content_block_delta": self._bare_raw,
            "content_block_stop": self._bare_raw,
            "message_delta": self._bare_raw,
            "message_stop": self._bare_raw,
        }

    # -- input ---------------------------------------------------------------
    def encode_turn(self, turn: Turn) -> bytes:
        """The user line, as awp-jsonl's (text, image and document blocks)."""
        return encode_user_line(turn)

    def encode_shutdown(self) -> bytes | None:
        """``{"type":"shutdown"}``."""
        return SHUTDOWN_LINE

    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one output object (or one line :attr:`line_loader` decoded typed); never raises."""
        if type(obj) is tuple:
            return self.decode_batch((obj,))
        if type(obj) is not dict:
            return not_an_object(obj)
        kind = obj.get("type")
        handler = self._dispatch.get(kind) if type(kind) is str else None
        if handler is None:
            return untyped(kind, obj)
        try:
            return handler(obj)
        except Exception as exc:  # a shape no branch foresaw: say so, keep the object
            return shape_error(kind, exc, obj)

    # -- control requests -------------------------------------------------
    def encode_interrupt(self) -> bytes:
        """The SDK's interrupt: a ``control_request`` the CLI acknowledges, then ends the turn.

        The real CLI ends it with an ``error_during_execution`` result (sometimes
        without a ``result`` key); the conversation reports ``turn_cancelled``.
        """
        line = {"type": "control_request", "request_id": f"req_{uuid.uuid4().hex}", "request": {"subtype": "interrupt"}}
        return orjson.dumps(line) + b"\n"

    def encode_control_response(
        self, request: Any, response: Mapping[str, Any] | None, error: str | None
    ) -> bytes | None:
        """The ``control_response`` line answering ``request`` (a ControlRequest).

        ``error`` set: ``{"subtype":"error","request_id":...,"error":error}``;
        else ``{"subtype":"success","request_id":...,"response":response}``, an
        ``allow`` without ``updatedInput`` getting the request's own input (the
        CLI requires it).
        """
        if isinstance(request, ControlRequest):
            request_id: Any = request.request_id
            subtype: Any = request.subtype
            body_request: Mapping[str, Any] = request.request
        elif isinstance(request, Mapping):
            request_id = request.get("request_id")
            inner = request.get("request")
            body_request = inner if isinstance(inner, Mapping) else {}
            subtype = body_request.get("subtype")
        else:
            request_id, subtype, body_request = request, None, {}
        if not isinstance(request_id, str) or not request_id:
            raise AgentrtError("invalid_control_request", "a control response needs the request's id")
        if error is not None:
            body: dict[str, Any] = {"subtype": "error", "request_id": request_id, "error": str(error)}
        else:
            data = dict(response or {})
            if subtype == "can_use_tool" and data.get("behavior") == "allow" and "updatedInput" not in data:
                original = body_request.get("input")
                data["updatedInput"] = dict(original) if isinstance(original, Mapping) else {}
            body = {"subtype": "success", "request_id": request_id, "response": data}
        try:
            return orjson.dumps({"type": "control_response", "response": body}) + b"\n"
        except TypeError as exc:
            raise AgentrtError("invalid_control_response", f"response is not JSON: {exc}") from None

    def _control_request(self, obj: dict[str, Any]) -> Sequence[Event]:
        request = obj.get("request")
        request_id = obj.get("request_id")
        subtype = request.get("subtype") if isinstance(request, dict) else None
        if isinstance(request, dict) and isinstance(request_id, str) and request_id and isinstance(subtype, str):
            # Every subtype surfaces: the CLI waits for an answer to each one,
            # so the conversation must answer (an error for what it does not do).
            return (ControlRequest(request_id=request_id, subtype=subtype, request=request, raw=obj),)
        return (Diagnostic(code="unexpected_output_shape", detail="control_request without id or subtype", raw=obj),)

    # -- system -------------------------------------------------------------
    def _init(self, obj: dict[str, Any]) -> Sequence[Event]:
        event = session_started(obj)
        if type(event) is SessionStarted:
            self.session_id = event.session_id
        return (event,)

    def _system(self, obj: dict[str, Any]) -> Sequence[Event]:
        subtype = obj.get("subtype")
        if subtype == "init":
            return self._init(obj)
        if subtype == "api_retry":
            return (Status(kind="api_retry", label=_retry_label(obj), detail=_scalars(obj), raw=obj),)
        if subtype == "status":
            status = obj.get("status")
            return (
                Status(
                    kind="status",
                    label=status if isinstance(status, str) else "",
                    detail=_scalars(obj),
                    raw=obj,
                ),
            )
        if subtype == "permission_denied":
            tool = obj.get("tool_name")
            label = f"Permission denied: {tool}" if isinstance(tool, str) and tool else "Permission denied"
            return (Status(kind="permission_denied", label=label[:80], detail=_scalars(obj), raw=obj),)
        if subtype in ("task_started", "task_progress", "task_notification"):
            text = obj.get("description") if subtype != "task_notification" else obj.get("summary")
            label = text[:80] if isinstance(text, str) else ""
            return (Status(kind=subtype, label=label, detail=_scalars(obj), raw=obj),)
        return (RawEvent(name=f"system/{subtype}" if isinstance(subtype, str) else "system", raw=obj),)

    def _rate_limit(self, obj: dict[str, Any]) -> Sequence[Event]:
        info = obj.get("rate_limit_info")
        status = info.get("status") if isinstance(info, dict) else None
        if isinstance(info, dict) and isinstance(status, str) and status and status != "allowed":
            label = "rate_limit_warning" if status == "allowed_warning" else "rate_limited"
            return (Status(kind="rate_limit", label=label, detail=_scalars(info, frozenset()), raw=obj),)
        return (RawEvent(name="rate_limit_event", raw=obj),)

    # -- streamed raw events -----------------------------------------------
    def _bare_raw(self, obj: dict[str, Any]) -> Sequence[Event]:
        return self._raw_event(obj, obj)

    def _stream_event(self, obj: dict[str, Any]) -> Sequence[Event]:
        ev = obj.get("event")
        if type(ev) is not dict:
            return (RawEvent(name="stream_event", raw=obj),)
        # Text deltas one object at a time take the general path; the per-chunk
        # hot path (decode_batch) inlines them.
        return self._raw_event(obj, ev)

    def decode_batch(self, objs: Sequence[Any]) -> list[Event]:
        """Events for one chunk's objects: text-delta lines inlined, the rest via :meth:`decode`.

        Text deltas are most lines of a streaming reply; handling them here
        saves two calls and a tuple per line (the host path's budget is about a
        microsecond and a half per line, JSON parsing included).  Same events
        as calling :meth:`decode` per object.  A ``(StreamDelta, line)`` pair
        from :attr:`line_loader` is a delta line decoded typed: its events carry
        the line itself as ``raw`` (bytes, parsed on first read).
        """
        out: list[Event] = []
        append = out.append
        decode = self.decode
        make = make_text_delta
        # The codec's streaming state, in locals for the loop (refreshed after
        # every line the general path handles).
        message_id, text_msg, blocks = self._message_id, self._text_msg, self._text_blocks
        for obj in objs:
            # Either path below finds (text, index, message id, raw) of a text
            # delta, or hands the line to the general path and goes on.
            if type(obj) is tuple:  # decoded typed by line_loader
                typed, raw = obj
                if type(typed) is not StreamDelta:
                    out.extend(self._typed_line(typed, raw))
                    message_id, text_msg, blocks = self._message_id, self._text_msg, self._text_blocks
                    continue
                ev = typed.event
                delta = ev.delta
                if type(delta) is not TextDeltaBody:
                    out.extend(self._typed_delta(typed, raw))
                    continue
                text = delta.text
                if not text:
                    continue
                index = ev.index
                msg = typed.api_message_id
            else:
                # Subscripts, not .get: a JSON value that is not an object raises
                # TypeError on a string key, a missing key KeyError, and either
                # sends the line down the general path, as does any other shape.
                text = None
                try:
                    if obj["type"] == "stream_event":
                        ev = obj["event"]
                        if ev["type"] == "content_block_delta":
                            delta = ev["delta"]
                            if delta["type"] == "text_delta":
                                text, index = delta["text"], ev["index"]
                                msg = obj.get("api_message_id")
                except (KeyError, TypeError):
                    text = None
                # A message id of another JSON type (even an unhashable one) takes
                # the general path, which treats it the same way.
                if not (type(text) is str and text and type(index) is int and (msg is None or type(msg) is str)):
                    out.extend(decode(obj))
                    # The general path may have started a message or ended the turn.
                    message_id, text_msg, blocks = self._message_id, self._text_msg, self._text_blocks
                    continue
                raw = obj
            msg = msg or message_id
            if msg != text_msg:
                text_msg, blocks = msg, self._text_message(msg)
            parts = blocks.get(index)
            if parts is None:
                blocks[index] = [text]
            else:
                parts.append(text)
            append(make(text, index, raw))
        return out

    def _typed_delta(self, typed: Any, line: bytes) -> Sequence[Event]:
        # The other delta kinds, as _raw_event handles them.
        ev = typed.event
        delta = ev.delta
        msg = typed.api_message_id or self._message_id
        if type(delta) is ThinkingDeltaBody:
            text = delta.thinking
            if not text:
                return _NO_EVENTS
            blocks = self._streamed.setdefault(("thinking", msg), {})
            blocks.setdefault(ev.index, []).append(text)
            return (ThinkingDelta(text=text, index=ev.index, raw=line),)
        if type(delta) is JsonDelta:
            block = self._tool_blocks.get((msg, ev.index))
            if block is not None:
                block[2].append(delta.partial_json)
        return _NO_EVENTS  # input_json_delta, signature_delta

    def _typed_line(self, typed: Any, line: bytes) -> Sequence[Event]:
        # The line kinds other than deltas, decoded typed: the same events as
        # the handlers of the parsed object.  What the structs leave out (a
        # failed result, a rate limit that limits) and a kept fragment orjson
        # refuses go to the general path with the line parsed as the framing
        # parses it; every fragment is parsed before any state changes.
        kind = type(typed)
        try:
            if kind is AssistantLine:
                return self._typed_assistant(typed, line)
            if kind is UserLine:
                results = typed.message.content
                if not results:
                    return (RawEvent(name="user", raw=line),)
                return [
                    ToolResult(
                        tool_use_id=block.tool_use_id or "",
                        content=JsonFragment(block.content),
                        is_error=block.is_error is True,
                        raw=line,
                    )
                    for block in results
                ]
            if kind is ResultLine:
                subtype = typed.subtype
                if not (typed.is_error is True or (subtype is not None and subtype.startswith("error"))):
                    usage_obj = loads_raw(typed.usage)
                    self._end_turn()
                    return (
                        TurnCompleted(
                            session_id=typed.session_id,
                            usage=Usage.from_mapping(usage_obj) if isinstance(usage_obj, dict) else None,
                            result=typed.result,
                            raw=line,
                        ),
                    )
            elif kind is RateLimitLine:
                info = typed.rate_limit_info
                if info is None or not info.status or info.status == "allowed":
                    return (RawEvent(name="rate_limit_event", raw=line),)
        except Exception:
            pass
        return self.decode(parse_line(line))

    def _typed_assistant(self, typed: AssistantLine, line: bytes) -> Sequence[Event]:
        content = typed.message.content
        msg = typed.message.id
        out: list[Event] = []
        for position, block in enumerate(content):
            kind = type(block)
            if kind is TextBlock:
                if block.text:  # type: ignore[union-attr]
                    out.extend(self._unstreamed("text", msg, position, block.text, line))  # type: ignore[union-attr]
            elif kind is ThinkingBlock:
                if block.thinking:  # type: ignore[union-attr]
                    out.extend(self._unstreamed("thinking", msg, position, block.thinking, line))  # type: ignore[union-attr]
            else:
                tool_id = block.id  # type: ignore[union-attr]
                if tool_id is not None and tool_id in self._tools_emitted:
                    continue
                # As tool_use_event builds it, the input parsed on first read.
                name = block.name or "tool"  # type: ignore[union-attr]
                fragment = block.input  # type: ignore[union-attr]
                tool_input: Any = JsonFragment(fragment, mapping=True)  # reads as the parsed mapping
                out.append(
                    ToolUse(
                        id=tool_id or "",
                        name=name,
                        input=tool_input,
                        summary=tool_label(name, ToolArgs(fragment)),
                        raw=line,
                    )
                )
                if tool_id:
                    self._tools_emitted.add(tool_id)
        return out if out else (RawEvent(name="assistant", raw=line),)

    def _text_message(self, msg: Any) -> dict[int, list[str]]:
        # The message streamed before is kept until its complete line or the
        # turn's end: as one string per block, not one object per delta (a
        # third of the memory for short deltas).
        for index, parts in self._text_blocks.items():
            if len(parts) > 1:
                self._text_blocks[index] = ["".join(parts)]
        blocks = self._streamed.setdefault(("text", msg), {})
        self._text_msg, self._text_blocks = msg, blocks
        return blocks

    def _raw_event(self, obj: dict[str, Any], ev: dict[str, Any]) -> Sequence[Event]:
        etype = ev.get("type")
        if etype == "content_block_delta":  # the hot path: most lines are text deltas
            delta = ev.get("delta")
            index = ev.get("index")
            if type(index) is not int:
                index = 0
            if type(delta) is dict:
                dtype = delta.get("type")
                if dtype == "text_delta":
                    text = delta.get("text")
                    if type(text) is str:
                        if not text:
                            return _NO_EVENTS
                        self._record("text", obj, index, text)
                        return (TextDelta(text=text, index=index, raw=obj),)
                elif dtype == "input_json_delta":
                    piece = delta.get("partial_json")
                    block = self._tool_blocks.get((self._msg(obj), index))
                    if block is not None and type(piece) is str:
                        block[2].append(piece)
                    return _NO_EVENTS
                elif dtype == "thinking_delta":
                    text = delta.get("thinking")
                    if type(text) is str:
                        if not text:
                            return _NO_EVENTS
                        self._record("thinking", obj, index, text)
                        return (ThinkingDelta(text=text, index=index, raw=obj),)
                elif dtype == "signature_delta":
                    return _NO_EVENTS
            return (RawEvent(name="stream_event/content_block_delta", raw=obj),)
        if etype == "message_start":
            message = ev.get("message")
            if isinstance(message, dict):
                self._message_id = message.get("id")
            return _NO_EVENTS
        if etype == "content_block_start":
            block = ev.get("content_block")
            index = ev.get("index")
            if isinstance(block, dict) and block.get("type") == "tool_use" and type(index) is int:
                tool_id = block.get("id")
                name = block.get("name")
                self._tool_blocks[(self._msg(obj), index)] = [
                    tool_id if isinstance(tool_id, str) else "",
                    name if isinstance(name, str) and name else "tool",
                    [],
                ]
            return _NO_EVENTS
        if etype == "content_block_stop":
            index = ev.get("index")
            pending = self._tool_blocks.pop((self._msg(obj), index), None) if type(index) is int else None
            if pending is not None and pending[0] not in self._tools_emitted:
                return self._streamed_tool(obj, pending)
            return _NO_EVENTS
        if etype == "message_delta" or etype == "message_stop":
            # Not a terminal here, and its usage is per API call: the result's counts the turn.
            return _NO_EVENTS
        return (RawEvent(name=f"stream_event/{etype}" if isinstance(etype, str) else "stream_event", raw=obj),)

    def _msg(self, obj: dict[str, Any]) -> Any:
        # The capture's CLI names the message on every stream_event; older
        # ones only in message_start.
        return obj.get("api_message_id") or self._message_id

    def _record(self, kind: str, obj: dict[str, Any], index: int, text: str) -> None:
        blocks = self._streamed.setdefault((kind, self._msg(obj)), {})
        parts = blocks.get(index)
        if parts is None:
            blocks[index] = [text]
        else:
            parts.append(text)

    def _streamed_tool(self, obj: dict[str, Any], pending: list[Any]) -> Sequence[Event]:
        tool_id, name, pieces = pending
        source = "".join(pieces)
        events: list[Event] = []
        tool_input: Any = {}
        if source.strip():
            try:
                tool_input = orjson.loads(source)
            except orjson.JSONDecodeError:
                events.append(
                    Diagnostic(
                        code="invalid_tool_input_json",
                        detail=f"streamed input of {name} is not JSON",
                        raw=obj,
                    )
                )
        if not isinstance(tool_input, dict):
            tool_input = {}
        if tool_id:
            self._tools_emitted.add(tool_id)
        events.append(ToolUse(id=tool_id, name=name, input=tool_input, summary=tool_label(name, tool_input), raw=obj))
        return events

    # -- complete messages --------------------------------------------------
    def _assistant(self, obj: dict[str, Any]) -> Sequence[Event]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return (RawEvent(name="assistant", raw=obj),)
        content = message.get("content")
        error = obj.get("error")
        if isinstance(error, str):
            # A synthetic message standing for an API error: not the model's
            # reply, so not text; the result that follows fails the turn.
            return (Status(kind="api_error", label=error[:80], detail=_api_error_detail(obj, content), raw=obj),)
        msg = message.get("id")
        out: list[Event] = []
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return (RawEvent(name="assistant", raw=obj),)
        for position, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" or btype == "thinking":
                text = block.get(btype)
                if isinstance(text, str) and text:
                    out.extend(self._unstreamed(btype, msg, position, text, obj))
            elif btype == "tool_use":
                tool_id = block.get("id")
                if isinstance(tool_id, str) and tool_id in self._tools_emitted:
                    continue
                event = tool_use_event(obj, block)
                if event.id:
                    self._tools_emitted.add(event.id)
                out.append(event)
            else:
                out.append(RawEvent(name=f"assistant/{btype}" if isinstance(btype, str) else "assistant", raw=obj))
        return out if out else (RawEvent(name="assistant", raw=obj),)

    def _unstreamed(self, kind: str, msg: Any, position: int, text: str, obj: Any) -> list[Event]:
        cls = TextDelta if kind == "text" else ThinkingDelta
        blocks = self._streamed.get((kind, msg))
        if not blocks:
            return [cls(text=text, index=position, raw=obj)]
        # The complete block matches the first streamed block not yet matched.
        index = next(iter(blocks))
        streamed = "".join(blocks.pop(index))
        if text == streamed:
            return []
        if text.startswith(streamed):
            return [cls(text=text[len(streamed) :], index=index, raw=obj)]
        return [
            Diagnostic(
                code="stream_text_mismatch",
                detail=f"complete {kind} block differs from what was streamed",
                raw=obj,
            )
        ]

    def _end_turn(self) -> None:
        # The turn is over: forget what was streamed in it.
        self._streamed.clear()
        self._text_msg, self._text_blocks = _UNSET, {}
        self._tool_blocks.clear()
        self._tools_emitted.clear()
        self._message_id = None

    def _result(self, obj: dict[str, Any]) -> Sequence[Event]:
        self._end_turn()
        subtype = obj.get("subtype")
        usage_obj = obj.get("usage")
        usage = Usage.from_mapping(usage_obj) if isinstance(usage_obj, dict) else None
        failed = obj.get("is_error") is True or (isinstance(subtype, str) and subtype.startswith("error"))
        if failed:
            return (TurnFailed(code=_failure_code(obj), message=failure_message(obj), usage=usage, raw=obj),)
        result = obj.get("result")
        return (
            TurnCompleted(
                session_id=_str(obj.get("session_id")),
                usage=usage,
                result=result if isinstance(result, str) else None,
                raw=obj,
            ),
        )


def _failure_code(obj: Mapping[str, Any]) -> str:
    status = obj.get("api_error_status")
    if isinstance(status, int) and not isinstance(status, bool) and 0 <= status < 1000:
        return f"api_error_{status}"
    if isinstance(status, str) and status.isdigit() and len(status) <= 3:
        return f"api_error_{status}"
    reason = obj.get("terminal_reason")
    if is_stable_code(reason) and reason != "completed":
        return str(reason)
    code = failure_code(obj)
    # ``success`` is the real CLI's subtype of failed turns too: no code in it.
    return "cc_error" if code == "cc_success" else code


def _retry_label(obj: Mapping[str, Any]) -> str:
    attempt, limit, status = obj.get("attempt"), obj.get("max_retries"), obj.get("error_status")
    head = f"API error {status}, retrying" if isinstance(status, int) else "Retrying API request"
    if isinstance(attempt, int) and isinstance(limit, int):
        return f"{head} (attempt {attempt} of {limit})"
    if isinstance(attempt, int):
        return f"{head} (attempt {attempt})"
    return head


def _api_error_detail(obj: Mapping[str, Any], content: Any) -> dict[str, Any]:
    detail = {k: obj[k] for k in ("error", "api_error_status", "api_error_type") if k in obj}
    if isinstance(content, list):
        texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        if texts:
            detail["text"] = "\n".join(texts)
    return detail
