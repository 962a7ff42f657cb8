"""Host side of stream-json: decodes the Claude Code CLI's output (see :mod:`agentrt_stream_json.codec`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from agentrt.dialect import HostCodec, Turn
from agentrt.errors import AgentrtError
from agentrt.events import (
    ControlRequest,
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    Status,
)
from agentrt.permissions import PermissionDecision
from agentrt_awp_jsonl.anthropic import (
    SHUTDOWN_LINE,
    dispatch,
    encode_user_line,
    session_started,
    tool_results,
)

from ._host_messages import CompleteMessages
from ._host_state import StreamState
from ._host_stream import StreamedDeltas

__all__ = ["StreamJsonHostCodec", "permission_response"]


_SKIP_DETAIL = frozenset({"type", "subtype", "uuid", "session_id"})


def _scalars(obj: Mapping[str, Any], skip: frozenset[str] = _SKIP_DETAIL) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in skip and (v is None or isinstance(v, (str, int, float, bool)))}


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
    already reported.  Composed of two parts over one
    :class:`~agentrt_stream_json._host_state.StreamState`: the streamed deltas
    (:class:`~agentrt_stream_json._host_stream.StreamedDeltas`, the hot path)
    and the complete messages
    (:class:`~agentrt_stream_json._host_messages.CompleteMessages`); this class
    keeps the session, the system lines and the control protocol.
    """

    def __init__(self) -> None:
        #: The session of the last ``system/init``.
        self.session_id: str | None = None
        self._state = state = StreamState()
        self._messages = messages = CompleteMessages(state, self.decode)
        self._stream = stream = StreamedDeltas(state, messages.typed_line)
        bare = stream.bare_raw
        self._dispatch: dict[str, Callable[[dict[str, Any]], Sequence[Event]]] = {
            "system": self._system,
            "assistant": messages.assistant,
            "user": tool_results,
            "result": messages.result,
            "rate_limit_event": self._rate_limit,
            "stream_event": stream.stream_event,
            "control_request": self._control_request,
            # The real CLI wraps raw events in stream_event; accept them bare
            # too, with the same (non-terminal) meaning.
            "message_start": bare,
            "content_block_start": bare,
            "content_block_delta": bare,
            "content_block_stop": bare,
            "message_delta": bare,
            "message_stop": bare,
        }

    # -- input ---------------------------------------------------------------
    def encode_turn(self, turn: Turn) -> bytes:
        """The user line, as awp-jsonl's (text, image and document blocks)."""
        return encode_user_line(turn)

    def encode_shutdown(self) -> bytes | None:
        """``{"type":"shutdown"}``."""
        return SHUTDOWN_LINE

    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one parsed output object; never raises."""
        return dispatch(self._dispatch, obj)

    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        """Events for one chunk's lines: each line msgspec takes typed is decoded from its struct, text deltas inline.

        Every other line goes to ``general``; the same events as :meth:`decode`
        on each line's plain parse (see
        :meth:`~agentrt_stream_json._host_stream.StreamedDeltas.decode_lines`).
        """
        return self._stream.decode_lines(lines, general)

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


def _retry_label(obj: Mapping[str, Any]) -> str:
    attempt, limit, status = obj.get("attempt"), obj.get("max_retries"), obj.get("error_status")
    head = f"API error {status}, retrying" if isinstance(status, int) else "Retrying API request"
    if isinstance(attempt, int) and isinstance(limit, int):
        return f"{head} (attempt {attempt} of {limit})"
    if isinstance(attempt, int):
        return f"{head} (attempt {attempt})"
    return head
