"""Agent side of stream-json: prints what the Claude Code CLI prints (see :mod:`agentrt_stream_json.codec`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.dialect import AgentCodec, AgentInput, Interrupt
from agentrt.events import (
    Event,
    SessionStarted,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from agentrt.permissions import PermissionDecision, PermissionRequest
from agentrt_awp_jsonl.anthropic import decode_user_input, init_object, tool_use_block

__all__ = ["StreamJsonAgentCodec"]


def _uid() -> str:
    return str(uuid.uuid4())


class StreamJsonAgentCodec(AgentCodec):
    """Agent side of stream-json: prints what the Claude Code CLI prints.

    Each text (or thinking) block becomes one ``assistant`` line when the block
    closes (at the next block, any other event, or the terminal event).  With
    ``partial=True`` (the CLI's ``--include-partial-messages``) the block is
    also streamed as ``stream_event`` lines (``message_start``,
    ``content_block_start``, one ``content_block_delta`` per delta,
    ``content_block_stop``, ``message_stop``), the complete ``assistant`` line
    coming just before ``content_block_stop`` as the real CLI does.

    Input: user lines and ``{"type":"shutdown"}`` as awp-jsonl.  A
    ``control_response`` from the host is stored in :attr:`control_responses`
    (by request id) and the input is otherwise ignored; a ``control_request``
    from the host is answered (``initialize`` and ``interrupt`` succeed, others
    get an error) by objects the agent loop collects with :meth:`drain_output`.

    Asking the host about a tool (what the CLI does when launched with
    ``--permission-prompt-tool stdio``): :meth:`permission_request` builds the
    ``can_use_tool`` control request and :meth:`permission_answer` reads the
    host's ``control_response`` to it (``agentrt bridge --to stream-json`` uses both).
    """

    #: The CLI asks its host about tools only when told to (``--permission-prompt-tool stdio``).
    asks_only_when_told = True

    def __init__(self, *, partial: bool = False) -> None:
        self.partial = partial
        self.session_id: str | None = None
        self.model: str | None = None
        self.control_responses: dict[str, Mapping[str, Any]] = {}
        self._outbox: list[dict[str, Any]] = []
        self._asked = 0
        self._asking: dict[str, Mapping[str, Any]] = {}  # our control request id -> the input asked about
        # open block: [kind, index, message id, pieces]
        self._open: list[Any] | None = None

    # -- input ---------------------------------------------------------------
    def decode_input(self, obj: Any) -> AgentInput:
        """A Turn / Shutdown / InputError, an Interrupt (the SDK's ``interrupt``), else ``None`` (control traffic)."""
        if isinstance(obj, Mapping):
            kind = obj.get("type")
            if kind == "control_response":
                response = obj.get("response")
                if isinstance(response, Mapping) and isinstance(response.get("request_id"), str):
                    self.control_responses[response["request_id"]] = response
                return None
            if kind == "control_request":
                self._answer(obj)
                request = obj.get("request")
                if (
                    isinstance(request, Mapping)
                    and request.get("subtype") == "interrupt"
                    and isinstance(obj.get("request_id"), str)
                ):
                    return Interrupt()
                return None
            if kind == "control_cancel_request":
                return None
        return decode_user_input(obj)

    def _answer(self, obj: Mapping[str, Any]) -> None:
        request_id = obj.get("request_id")
        request = obj.get("request")
        subtype = request.get("subtype") if isinstance(request, Mapping) else None
        if not isinstance(request_id, str):
            return
        if subtype in ("initialize", "interrupt"):
            body: dict[str, Any] = {"subtype": "success", "request_id": request_id, "response": {}}
        else:
            body = {
                "subtype": "error",
                "request_id": request_id,
                "error": f"unsupported control request: {subtype}",
            }
        self._outbox.append({"type": "control_response", "response": body})

    def permission_request(self, request: PermissionRequest) -> tuple[str, dict[str, Any]]:
        """The ``can_use_tool`` control request asking the host about ``request``, as ``(id, message)``."""
        self._asked += 1
        rid = f"agentrt-perm-{self._asked}"
        body: dict[str, Any] = {"subtype": "can_use_tool", "tool_name": request.tool_name, "input": dict(request.input)}
        raw = request.raw if isinstance(request.raw, Mapping) else {}
        asked = raw.get("request")
        tool_use_id = asked.get("tool_use_id") if isinstance(asked, Mapping) else None
        if isinstance(tool_use_id, str):
            body["tool_use_id"] = tool_use_id
        body["permission_suggestions"] = []
        self._asking[rid] = body["input"]
        return rid, {"type": "control_request", "request_id": rid, "request": body}

    def permission_answer(self, obj: Any) -> tuple[str, PermissionDecision] | None:
        """``(id, decision)`` when ``obj`` is the host's ``control_response`` to one of our requests.

        ``{"behavior":"allow","updatedInput":...}`` allows (with the input the
        host gave, when it differs); ``deny``, an ``error`` response or any
        other answer denies, saying why.
        """
        if not isinstance(obj, Mapping) or obj.get("type") != "control_response":
            return None
        response = obj.get("response")
        rid = response.get("request_id") if isinstance(response, Mapping) else None
        if not isinstance(rid, str) or rid not in self._asking:
            return None
        assert isinstance(response, Mapping)
        asked = self._asking.pop(rid)
        if response.get("subtype") == "error":
            error = response.get("error")
            return rid, PermissionDecision(allow=False, message=f"the host failed to answer: {str(error)[:200]}")
        body = response.get("response")
        behavior = body.get("behavior") if isinstance(body, Mapping) else None
        if behavior == "allow":
            assert isinstance(body, Mapping)
            updated = body.get("updatedInput")
            if isinstance(updated, Mapping) and updated != asked:
                return rid, PermissionDecision(allow=True, updated_input=dict(updated))
            return rid, PermissionDecision(allow=True)
        if behavior == "deny":
            assert isinstance(body, Mapping)
            message = body.get("message")
            return rid, PermissionDecision(allow=False, message=message if isinstance(message, str) else "")
        return rid, PermissionDecision(allow=False, message="the host's answer was neither allow nor deny")

    def drain_output(self) -> list[dict[str, Any]]:
        """Objects owed to the host outside any event (control responses), in order."""
        out, self._outbox = self._outbox, []
        return out

    # -- output --------------------------------------------------------------
    def _envelope(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["parent_tool_use_id"] = None
        obj["session_id"] = self.session_id or ""
        obj["uuid"] = _uid()
        return obj

    def _stream(self, event: dict[str, Any], message_id: str) -> dict[str, Any]:
        obj = self._envelope({"type": "stream_event", "event": event})
        obj["api_message_id"] = message_id
        return obj

    def _message(self, message_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model or "agentrt",
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
        }

    def _close(self, out: list[dict[str, Any]]) -> None:
        if self._open is None:
            return
        kind, index, message_id, pieces = self._open
        self._open = None
        text = "".join(pieces)
        block = (
            {"type": "text", "text": text}
            if kind == "text"
            else {"type": "thinking", "thinking": text, "signature": ""}
        )
        out.append(self._envelope({"type": "assistant", "message": self._message(message_id, [block])}))
        if self.partial:
            out.append(self._stream({"type": "content_block_stop", "index": index}, message_id))
            out.append(self._stream({"type": "message_stop"}, message_id))

    def _delta(self, kind: str, index: int, text: str, out: list[dict[str, Any]]) -> None:
        if self._open is None or self._open[0] != kind or self._open[1] != index:
            self._close(out)
            message_id = "msg_" + uuid.uuid4().hex[:24]
            self._open = [kind, index, message_id, []]
            if self.partial:
                out.append(
                    self._stream({"type": "message_start", "message": self._message(message_id, [])}, message_id)
                )
                start = {"type": "text", "text": ""} if kind == "text" else {"type": "thinking", "thinking": ""}
                out.append(
                    self._stream({"type": "content_block_start", "index": index, "content_block": start}, message_id)
                )
        assert self._open is not None
        self._open[3].append(text)
        if self.partial:
            delta = (
                {"type": "text_delta", "text": text} if kind == "text" else {"type": "thinking_delta", "thinking": text}
            )
            out.append(self._stream({"type": "content_block_delta", "index": index, "delta": delta}, self._open[2]))

    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """Output objects for one event, as the Claude Code CLI prints them."""
        out: list[dict[str, Any]] = []
        if isinstance(event, TextDelta):
            if event.text:
                self._delta("text", event.index, event.text, out)
            return out
        if isinstance(event, ThinkingDelta):
            if event.text:
                self._delta("thinking", event.index, event.text, out)
            return out
        self._close(out)
        if isinstance(event, SessionStarted):
            self.session_id = event.session_id
            self.model = event.model
            obj = init_object(event)
            obj["uuid"] = _uid()
            out.append(obj)
        elif isinstance(event, ToolUse):
            message_id = "msg_" + uuid.uuid4().hex[:24]
            out.append(
                self._envelope({"type": "assistant", "message": self._message(message_id, [tool_use_block(event)])})
            )
        elif isinstance(event, ToolResult):
            out.append(
                self._envelope(
                    {
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
                )
            )
        elif isinstance(event, TurnCompleted):
            out.append(self._result(event.session_id, False, "success", event.result, event.usage))
        elif isinstance(event, TurnFailed):
            obj = self._result(None, True, "error_during_execution", event.code, event.usage)
            obj["errors"] = [event.message] if event.message else []
            out.append(obj)
        return out

    def _result(
        self, session_id: str | None, is_error: bool, subtype: str, result: str | None, usage: Usage | None
    ) -> dict[str, Any]:
        # duration_ms / duration_api_ms / num_turns are required by SDK parsers;
        # agentrt does not measure them here, so they are 0 and 1.
        obj: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": 0,
            "duration_api_ms": 0,
            "num_turns": 1,
            "session_id": session_id or self.session_id or "",
        }
        if result is not None:
            obj["result"] = result
        if usage is not None:
            obj["usage"] = usage.to_dict()
        obj["uuid"] = _uid()
        return obj
