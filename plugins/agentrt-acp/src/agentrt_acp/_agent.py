"""Agent side of ACP: agentrt answers as the agent (the reference agent, the bridge).

:meth:`AcpAgentCodec.decode_input` answers the handshake itself (responses wait
in :meth:`AcpAgentCodec.drain_output`) and returns a :class:`~agentrt.dialect.Turn`
for each ``session/prompt``; :meth:`AcpAgentCodec.encode` turns events into
``session/update`` notifications and the terminal event into the prompt's
response.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentrt.dialect import AgentCodec, AgentInput, ContentBlock, ImageBlock, InputError, Interrupt, TextBlock, Turn
from agentrt.events import (
    Event,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from agentrt.permissions import PermissionDecision, PermissionRequest

from ._asking import PermissionAsker
from ._host import PROTOCOL_VERSION
from ._kinds import tool_kind
from ._session_options import SessionOptions

__all__ = ["AcpAgentCodec"]

_REASONS = {
    "max_tokens": "max_tokens",
    "max_turn_requests": "max_turn_requests",
    "refusal": "refusal",
    "turn_cancelled": "cancelled",
}


_SWITCHES = ("session/set_mode", "session/set_model", "session/set_config_option")
_WHAT = {"session/set_mode": "mode", "session/set_model": "model", "session/set_config_option": "config option"}
_ERROR_CODE = re.compile(r"([a-z][a-z0-9_]{1,63}): ")
_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_MAX_CWD = 4096  # PATH_MAX


def _session_cwd(params: Mapping[str, Any]) -> str | None:
    """The ``cwd`` of a ``session/new`` or ``session/load``: an absolute path of an existing directory, else ``None``.

    ACP requires an absolute path; the session's tools act there, so it must exist now.
    """
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not cwd or len(cwd) > _MAX_CWD or "\0" in cwd or not os.path.isabs(cwd):
        return None
    return os.path.normpath(cwd) if os.path.isdir(cwd) else None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentrt")
    except PackageNotFoundError:
        return "0"


def _blocks(prompt: Any) -> tuple[ContentBlock, ...]:
    out: list[ContentBlock] = []
    for block in prompt if isinstance(prompt, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            out.append(TextBlock(text=block["text"]))
        elif block.get("type") == "image" and isinstance(block.get("data"), str):
            mime = block.get("mimeType")
            out.append(ImageBlock(media_type=mime if isinstance(mime, str) else "image/png", data=block["data"]))
    return tuple(out)


class AcpAgentCodec(AgentCodec):
    """Agent side of ACP, one instance per agent process."""

    #: Closing stdin ends the connection: a bridge cancels the running turn, whose reply nobody would read.
    cancel_on_close = True

    def __init__(self) -> None:
        self._outbox: list[dict[str, Any]] = []
        self._sessions: set[str] = set()
        self._session: str | None = None
        self._prompt_id: Any = None
        self._cancelled = False  # session/cancel seen for the running prompt
        self._asker = PermissionAsker()
        #: Set by a host that can resume a session (the bridge): ``session/load`` is then offered.
        self.load_sessions = False
        #: Models and modes the host can switch to (filled by the bridge; empty: none offered).
        self.options = SessionOptions()
        #: Set by a host that opens its own agent's session first (the bridge hosting an ACP agent):
        #: ``session/new`` is then answered through :meth:`answer_switch`, with what that agent offers.
        self.defer_new = False
        #: (kind, request id, session id, model or mode, cwd of a new or loaded session)
        self._opened: list[tuple[str, Any, str, Any, str | None]] = []

    def _reply(self, rid: Any, result: Mapping[str, Any]) -> None:
        self._outbox.append({"jsonrpc": "2.0", "id": rid, "result": dict(result)})

    def _error(self, rid: Any, code: int, message: str, data_code: str | None = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data_code is not None:
            error["data"] = {"code": data_code}
        self._outbox.append({"jsonrpc": "2.0", "id": rid, "error": error})

    def _bad_cwd(self, rid: Any) -> None:
        self._error(rid, -32602, "invalid_session_cwd: cwd must be the absolute path of an existing directory",
                    "invalid_session_cwd")  # fmt: skip

    def decode_input(self, obj: Any) -> AgentInput:
        """Handshake requests answered here; a prompt is a Turn, ``session/cancel`` an Interrupt."""
        if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
            return InputError(code="invalid_input_message", detail="not a JSON-RPC 2.0 message")
        method, rid, params = obj.get("method"), obj.get("id"), obj.get("params")
        params = params if isinstance(params, dict) else {}
        if not isinstance(method, str):
            return None  # a response to one of our requests
        if method == "session/cancel":
            if self._prompt_id is None or params.get("sessionId") != self._session:
                return None
            self._cancelled = True  # the prompt is answered `cancelled` however the inner turn ends
            return Interrupt()
        if rid is None or isinstance(rid, (dict, list, bool, float)):
            return None  # another notification
        if method == "initialize":
            caps = {"loadSession": self.load_sessions, "promptCapabilities": {"image": True, "embeddedContext": False}}
            info = {"name": "agentrt", "title": "agentrt", "version": _version()}
            self._reply(
                rid,
                {"protocolVersion": PROTOCOL_VERSION, "agentCapabilities": caps, "authMethods": [], "agentInfo": info},
            )
        elif method == "session/new":
            cwd = _session_cwd(params)
            if cwd is None:
                self._bad_cwd(rid)
                return None
            new_id = uuid.uuid4().hex
            self._sessions.add(new_id)
            self._session = new_id
            self._opened.append(("new", rid if self.defer_new else None, new_id, None, cwd))
            if not self.defer_new:
                self._reply(rid, {"sessionId": new_id, **self.options.fields()})
        elif method == "session/load" and self.load_sessions:
            sid = params.get("sessionId")
            if not isinstance(sid, str) or not _SESSION_ID.fullmatch(sid):
                self._error(rid, -32602, "sessionId must match [A-Za-z0-9._:-]{1,256}")
                return None
            cwd = _session_cwd(params)
            if cwd is None:
                self._bad_cwd(rid)
                return None
            if self._prompt_id is not None:
                self._error(rid, -32600, "a prompt is running")
                return None
            self._sessions.add(sid)
            self._session = sid
            self._opened.append(("load", rid, sid, None, cwd))  # answered by the host once loaded (answer_switch)
        elif method in _SWITCHES and self.options.offers(method):
            self._switch(rid, method, params)
        elif method == "session/prompt":
            sid = params.get("sessionId")
            if not isinstance(sid, str) or sid not in self._sessions:
                self._error(rid, -32602, "unknown session")
                return None
            if self._prompt_id is not None:
                self._error(rid, -32600, "a prompt is already running")
                return None
            blocks = _blocks(params.get("prompt"))
            if not blocks:
                self._error(rid, -32602, "the prompt has no supported content")
                return None
            self._session, self._prompt_id, self._cancelled = sid, rid, False
            return Turn(content=blocks)
        else:
            self._error(rid, -32601, "Method not found")
        return None

    def _switch(self, rid: Any, method: str, params: Mapping[str, Any]) -> None:
        """A model, mode or config option switch: checked here, queued for the host (:meth:`take_opened`)."""
        sid = params.get("sessionId")
        value: Any
        if method == "session/set_mode":
            kind, value = "mode", params.get("modeId")
            ok = self.options.has_mode(value)
        elif method == "session/set_model":
            kind, value = "model", params.get("modelId")
            ok = self.options.has_model(value)
        else:
            config_id, value = params.get("configId"), params.get("value")
            ok = self.options.has_option(config_id, value)
            if self.options.hosted is not None:
                kind, value = "option", (config_id, value)  # any offered option, answered by the agent
            else:
                kind = "model_option"
        if not isinstance(sid, str) or sid not in self._sessions or not ok:
            self._error(rid, -32602, f"unknown session or {_WHAT[method]}")
            return
        if self._prompt_id is not None:
            self._error(rid, -32600, "a prompt is running")
            return
        self._opened.append((kind, rid, sid, value, None))  # answered by the host once switched

    @staticmethod
    def startup_error_reply(obj: Any, code: str, message: str) -> dict[str, Any] | None:
        """The JSON-RPC error (-32603) answering request ``obj`` when the agent could not start, else ``None``.

        ``message`` starts with the stable ``code``; ``data.code`` carries it alone.
        """
        if not isinstance(obj, dict) or not isinstance(obj.get("method"), str):
            return None
        rid = obj.get("id")
        if rid is None or isinstance(rid, (dict, list, bool, float)):
            return None  # a notification (or a malformed id) gets no response
        text = f"{code}: {message}" if message and message != code else code
        error = {"code": -32603, "message": text, "data": {"code": code}}
        return {"jsonrpc": "2.0", "id": rid, "error": error}

    def take_opened(self) -> list[tuple[str, Any, str, Any, str | None]]:
        """Session switches since the last call, in order: ``(kind, request id, session id, value, cwd)``.

        ``kind`` is ``new`` (already answered, unless :attr:`defer_new`: its request id is then
        set), ``load``, ``mode`` (``session/set_mode``, with its mode id), ``model`` /
        ``model_option`` (``session/set_model`` / ``session/set_config_option`` for ``model``, with
        its model id), or, with a hosted agent's offer, ``option`` (``session/set_config_option``,
        value ``(config id, value)``); all but an answered ``new`` wait for :meth:`answer_switch` or
        :meth:`answer_forwarded` (the host switches first).  ``cwd`` is the working directory a ``new``
        or ``load`` names (absolute, an existing directory when it was asked for; a request naming
        anything else is refused -32602 ``invalid_session_cwd``), ``None`` for the others.
        """
        out, self._opened = self._opened, []
        return out

    def answer_switch(
        self, kind: str, rid: Any, error: str | None = None, value: str | None = None
    ) -> list[dict[str, Any]]:
        """The response to a deferred ``new``, a ``load``, a ``mode`` or model switch: success, or -32603 ``error``.

        ``error`` that starts with a stable code (``code: reason``) carries it as
        ``data.code`` too.  A ``new`` is answered with its session id
        (``value``) and the offer.  A mode switch is also announced with a
        ``current_mode_update``.
        """
        if error is not None:
            coded = _ERROR_CODE.match(error)
            self._error(rid, -32603, error, coded.group(1) if coded else None)
        elif kind == "new":
            self._reply(rid, {"sessionId": value, **self.options.fields()})
        elif kind in ("model", "model_option"):
            self.options.current_model = value
            self._reply(rid, {"configOptions": self.options.config_options()} if kind == "model_option" else {})
        elif kind == "mode":
            self.options.current_mode = value
            self._reply(rid, {})
            self._outbox.append(self._update({"sessionUpdate": "current_mode_update", "currentModeId": value}))
        else:
            self._reply(rid, self.options.fields())
        return self.drain_output()

    def answer_forwarded(self, kind: str, rid: Any, value: Any, response: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The response to a switch the host forwarded to its hosted ACP agent: that agent's answer, relayed.

        An error is passed on as the agent gave it; a success updates the offer
        (a mode switch is announced with a ``current_mode_update``, a config
        option's answer carries the options the client may see).
        """
        error = response.get("error")
        if error is not None or not isinstance(response.get("result"), dict):
            error = error if isinstance(error, dict) else {"code": -32603, "message": "the agent answered no result"}
            self._outbox.append({"jsonrpc": "2.0", "id": rid, "error": error})
            return self.drain_output()
        if kind == "mode":
            method, params = "session/set_mode", {"modeId": value}
        elif kind == "model":
            method, params = "session/set_model", {"modelId": value}
        else:
            method, params = "session/set_config_option", {"configId": value[0], "value": value[1]}
        result = response["result"]
        self.options.switched(method, params, result)
        if kind == "option":
            self._reply(rid, {**result, "configOptions": self.options.config_options()})
        else:
            self._reply(rid, result)
        if kind == "mode":
            self._outbox.append(self._update({"sessionUpdate": "current_mode_update", "currentModeId": value}))
        return self.drain_output()

    def permission_request(self, request: PermissionRequest) -> tuple[str, dict[str, Any]] | PermissionDecision:
        """A ``session/request_permission`` for the running prompt's session, as ``(id, message)``.

        A decision instead when the client already chose ``allow_always`` for this tool.
        """
        return self._asker.ask(self._session or "", request)

    def permission_answer(self, obj: Any) -> tuple[str, PermissionDecision, str] | None:
        """``(id, decision, by)`` when ``obj`` answers one of our permission requests (chosen by option kind).

        ``by`` is ``user:always`` for an ``allow_always`` answer, else ``user``.
        """
        return self._asker.answer(obj)

    def drain_output(self) -> list[dict[str, Any]]:
        """Messages owed to the client outside any event (handshake responses, errors), in order."""
        out, self._outbox = self._outbox, []
        return out

    def _update(self, update: dict[str, Any]) -> dict[str, Any]:
        params = {"sessionId": self._session or "", "update": update}
        return {"jsonrpc": "2.0", "method": "session/update", "params": params}

    def replay(self, session_id: str, events: Iterable[Event]) -> list[dict[str, Any]]:
        """``session/update`` notifications replaying a loaded session's recorded history, in order.

        Each turn's prompt (``TurnStarted``) is a ``user_message_chunk``; text, thinking and tool
        calls are what :meth:`encode` sends for them live; other events replay nothing.
        """
        out = []
        for event in events:
            update: dict[str, Any] | None
            if isinstance(event, TurnStarted):
                update = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": event.prompt}}
            else:
                update = _event_update(event)
            if update is not None:
                out.append({"jsonrpc": "2.0", "method": "session/update",
                            "params": {"sessionId": session_id, "update": update}})  # fmt: skip
        return out

    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """``session/update`` per event; the terminal event answers the running prompt."""
        out = self.drain_output()
        update = _event_update(event)
        if update is not None:
            out.append(self._update(update))
        elif isinstance(event, (TurnCompleted, TurnFailed)) and self._prompt_id is not None:
            rid, self._prompt_id = self._prompt_id, None
            cancelled, self._cancelled = self._cancelled, False
            if cancelled:
                # The protocol: a cancelled prompt is answered `cancelled`, however the inner turn ended.
                self._reply(rid, {"stopReason": "cancelled"})
            elif isinstance(event, TurnCompleted):
                result: dict[str, Any] = {"stopReason": "end_turn"}
                if event.usage is not None:
                    u = event.usage
                    usage = {
                        "inputTokens": u.input_tokens or 0,
                        "outputTokens": u.output_tokens or 0,
                        "totalTokens": (u.input_tokens or 0) + (u.output_tokens or 0),
                    }
                    result["usage"] = usage
                self._reply(rid, result)
            elif event.code in _REASONS:
                self._reply(rid, {"stopReason": _REASONS[event.code]})
            else:
                self._error(rid, -32603, f"{event.code}: {event.message}" if event.message else event.code)
            out.extend(self.drain_output())
        return out


def _event_update(event: Event) -> dict[str, Any] | None:
    """The ``session/update`` body for text, thinking and tool events; ``None`` for the others."""
    if isinstance(event, (TextDelta, ThinkingDelta)):
        kind = "agent_message_chunk" if isinstance(event, TextDelta) else "agent_thought_chunk"
        return {"sessionUpdate": kind, "content": {"type": "text", "text": event.text}}
    if isinstance(event, ToolUse):
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": event.id,
            "title": event.summary or event.name,
            "kind": tool_kind(event.name),
            "status": "in_progress",
            "rawInput": dict(event.input),
        }
    if isinstance(event, ToolResult):
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": event.tool_use_id,
            "status": "failed" if event.is_error else "completed",
            "rawOutput": event.content,
        }
    return None
