"""Host side of ACP: agentrt is the client, the agent CLI a JSON-RPC peer on stdio.

The codec is a small state machine with no I/O.  The first turn's
``encode_turn`` writes ``initialize`` and keeps the turn; each handshake
response is decoded into events and the next request (``session/new`` or
``session/load``, then the set-up of :mod:`._setup`: the model through
``session/set_model`` or the model config option, the mode; then
``session/prompt``) is left in :meth:`AcpHostCodec.drain_output` for the host
to write.  A host may open the session before any turn instead
(:meth:`AcpHostCodec.open_session`: the bridge does, to tell its own client
what the agent offers) and send the agent requests of its client's
(:meth:`AcpHostCodec.forward`).  The prompt's
response ends the turn.  Agent requests become
:class:`~agentrt.events.ControlRequest` events and are answered through
:mod:`._agent_requests`; a read's text-chunk lines take the typed path of
:mod:`._typed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from agentrt.dialect import HostCodec, Turn
from agentrt.errors import AgentrtError
from agentrt.events import (
    ControlRequest,
    Diagnostic,
    Event,
    RawEvent,
    SessionStarted,
    TurnFailed,
)

from ._agent_requests import AgentRequests
from ._options import AcpOptions
from ._rpc import PROTOCOL_VERSION, STOP_REASON_CODES, rpc_error_code
from ._rpc import dumps as _dumps
from ._rpc import rpc_message as _rpc_message
from ._setup import OFFER_KEYS, SETUP_METHODS, Forwarded, setup_answered, setup_requests, switched
from ._turn import prompt_blocks, terminal_event
from ._typed import decode_text_chunks
from ._updates import UpdateDecoder

__all__ = ["AcpHostCodec", "Forwarded", "PROTOCOL_VERSION", "rpc_error_code", "STOP_REASON_CODES"]


class AcpHostCodec(HostCodec):
    """Host side of ACP, one instance per agent process."""

    def __init__(self, options: AcpOptions | None = None, *, model: str | None = None, mode: str | None = None) -> None:
        self._options = options or AcpOptions()
        # What a host's client chose (the bridge's): the model wins over the launch's, the mode is set once open.
        self._chosen_model, self._mode = model, mode
        self._next_id = 0
        self._pending: dict[Any, str] = {}  # our request id -> method
        self._requests = AgentRequests(self._options)
        self._out: list[bytes] = []
        self._phase = "idle"  # idle -> handshake -> ready
        self._turn: Turn | None = None  # the turn waiting for the handshake
        self._prompt_id: int | None = None
        self._capabilities: Mapping[str, Any] = {}
        self._resume: str | None = None
        self._model: str | None = None
        self._cwd = "/"
        #: The session the agent opened (or loaded), once it has.
        self.session_id: str | None = None
        self._updates = UpdateDecoder()
        #: A loaded session's replay lasts until the prompt is written (some agents replay after answering).
        self._replay_until_prompt = False
        #: Set once a handshake begun by :meth:`open_session` has ended (see :attr:`open_failure`).
        self.opened: trio.Event | None = None
        #: ``(code, message)`` when that handshake failed.
        self.open_failure: tuple[str, str] | None = None
        #: What the opened session can switch to: the agent's ``models``, ``modes``, ``configOptions`` as sent.
        self.offer: dict[str, Any] = {}
        self._setup: list[tuple[str, dict[str, Any]]] = []  # set-up requests still to send, in order
        self._step: tuple[str, dict[str, Any]] | None = None  # the one in flight
        self._announce = False  # the session opened before any turn: SessionStarted goes with the first prompt
        self._forwards: dict[int, Forwarded] = {}

    # -- configuration and encoding ------------------------------------------
    def start(self, *, resume: str | None, model: str | None, cwd: str) -> None:
        """Remember what the handshake asks for: the session to load, the model, the cwd."""
        self._resume, self._model, self._cwd = resume, self._chosen_model or model, cwd

    def _request(self, method: str, params: Mapping[str, Any]) -> bytes:
        rid = self._next_id
        self._next_id += 1
        self._pending[rid] = method
        return _dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def _blocks(self, turn: Turn, *, check: bool) -> list[dict[str, Any]]:
        caps = self._capabilities.get("promptCapabilities")
        return prompt_blocks(turn, caps if isinstance(caps, dict) else {}, check=check)

    def encode_turn(self, turn: Turn) -> bytes:
        """``session/prompt`` once the session is open; before that, ``initialize`` (the turn waits)."""
        blocks = self._blocks(turn, check=self._phase == "ready")
        _dumps(blocks)  # refuse text that cannot be encoded before anything is written
        if self._phase == "ready" and self.session_id is not None:
            if self._replay_until_prompt:  # an early-loaded session: its replay ends with this prompt
                self._replay_until_prompt = self._updates.replaying = False
            return self._prompt(blocks)
        self._turn = turn
        if self._phase == "handshake":  # begun by open_session: the prompt follows it
            return b""
        self._phase = "handshake"
        return self._initialize()

    def open_session(self) -> bytes | None:
        """``initialize`` to open the session now, before any turn; ``None`` once a handshake has begun.

        The handshake then goes on as the first turn's would (the host writes
        :meth:`drain_output`); when it ends, :attr:`opened` is set, with
        :attr:`offer` filled, or :attr:`open_failure` saying why it failed.
        The session's ``SessionStarted`` comes with the first prompt's output.
        """
        if self._phase != "idle":
            return None
        self.opened, self.open_failure = trio.Event(), None
        self._phase = "handshake"
        return self._initialize()

    def forward(self, method: str, params: Mapping[str, Any]) -> tuple[bytes, Forwarded] | None:
        """The request ``method`` in the open session (``params`` with its ``sessionId``), and its answer's slot.

        ``None`` when no session is open.  The agent's response goes to the
        slot (never to the events); a success also updates :attr:`offer`.
        """
        if self._phase != "ready" or self.session_id is None:
            return None
        slot = Forwarded(method, params)
        line = self._request(method, {**params, "sessionId": self.session_id})
        self._forwards[self._next_id - 1] = slot
        return line, slot

    def _initialize(self) -> bytes:
        fs = {"readTextFile": self._options.fs_read, "writeTextFile": self._options.fs_write}
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": fs, "terminal": False},
            "clientInfo": {"name": "agentrt", "title": "agentrt", "version": "0.1.0"},
        }
        return self._request("initialize", params)

    def _prompt(self, blocks: list[dict[str, Any]]) -> bytes:
        line = self._request("session/prompt", {"sessionId": self.session_id, "prompt": blocks})
        self._prompt_id = self._next_id - 1
        return line

    def encode_interrupt(self) -> bytes | None:
        """``session/cancel``, and ``cancelled`` for every permission request still open (the spec asks it)."""
        if self.session_id is None or self._prompt_id is None:
            return None
        cancel = _dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.session_id}})
        return b"".join([cancel, *self._requests.cancel_permissions()])

    def drain_output(self) -> bytes | None:
        """The handshake's next request, when a response called for one.

        After ``session/load``, updates stay replayed history until the prompt
        goes out here: Gemini CLI answers the load request first and replays
        after, so the load response alone does not end the replay.
        """
        if not self._out:
            return None
        out = b"".join(self._out)
        self._out.clear()
        if self._replay_until_prompt and self._prompt_id is not None:
            self._replay_until_prompt = False
            self._updates.replaying = False
        return out

    # -- answering agent requests ---------------------------------------------
    def encode_control_response(
        self, request: Any, response: Mapping[str, Any] | None, error: str | None
    ) -> bytes | None:
        """The JSON-RPC response to an agent request (``None`` when it was already answered).

        A permission request gets the option the decision asks for, any other
        request answered with an error ``method not found``
        (:meth:`.AgentRequests.encode_response`).
        """
        return self._requests.encode_response(request, response, error)

    async def answer_control(self, request: ControlRequest) -> bytes | None:
        """File requests, when the options enable them (confined to the cwd); ``None`` for the rest."""
        return await self._requests.answer(request, self._cwd)

    # -- decoding --------------------------------------------------------------
    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        """Events for one chunk's lines, parsed and decoded in one loop (the host path's chunk-at-a-time path).

        A text-chunk notification msgspec takes becomes a ``TextDelta`` at
        once, its ``raw`` the line; every other line goes to ``general`` (the
        framing's parse, then :meth:`decode`)
        (:func:`~agentrt_acp._typed.decode_text_chunks`).  Same events as
        :meth:`decode` on each line's plain parse.
        """
        return decode_text_chunks(self._announcement(), lines, general, self._updates, self)

    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one JSON-RPC message from the agent."""
        if self._announce and self._prompt_id is not None:
            return [*self._announcement(), *self.decode(obj)]
        if type(obj) is not dict:
            return (Diagnostic(code="unexpected_output_shape", detail="not a JSON-RPC message object", raw=obj),)
        method = obj.get("method")
        if method == "session/update":
            params = obj.get("params")
            if "id" in obj or not isinstance(params, dict) or not isinstance(params.get("update"), dict):
                return (Diagnostic(code="unexpected_output_shape", detail="malformed session/update", raw=obj),)
            sid = params.get("sessionId")
            if self.session_id is not None and sid != self.session_id:
                return (Diagnostic(code="unknown_session", detail="session/update for another session", raw=obj),)
            return self._updates.decode(params["update"], obj)
        if isinstance(method, str):
            if "id" not in obj:
                return (RawEvent(name=method, raw=obj),)
            return self._requests.decode(obj, method)
        if "id" in obj and ("result" in obj or "error" in obj):
            return self._response(obj)
        return (
            Diagnostic(code="unexpected_output_shape", detail="neither request, notification nor response", raw=obj),
        )

    def _announcement(self) -> list[Event]:
        """The ``SessionStarted`` of a session opened before any turn, once that turn's prompt is out."""
        if not self._announce or self._prompt_id is None:
            return []
        self._announce = False
        return [SessionStarted(session_id=self.session_id or "", model=self._model)]

    def _response(self, obj: dict[str, Any]) -> Sequence[Event]:
        rid = obj["id"]
        method = self._pending.pop(rid, None) if isinstance(rid, (int, str)) else None
        if method is None:
            return (Diagnostic(code="unexpected_response", detail="a response to no request of ours", raw=obj),)
        error = obj.get("error")
        result = obj.get("result")
        if "error" in obj or not isinstance(result, dict):
            error = error if "error" in obj else {"code": -32603, "message": "result is not an object"}
        slot = self._forwards.pop(rid, None)
        if slot is not None:
            if error is None:  # keep the offer current
                self.offer = switched(self.offer, method, slot.params, result)
            slot.response = obj
            slot.done.set()
            return ()
        if method == "session/prompt":
            self._prompt_id = None
            return (terminal_event(result, error, obj, self.session_id),)
        if method == "initialize":
            return self._initialized(result, error, obj)
        if method in ("session/new", "session/load"):
            return self._opened(method, result, error, obj)
        if method in SETUP_METHODS:
            if error is None and self._step is not None:
                self.offer = switched(self.offer, method, self._step[1], result)
            return [setup_answered(method, error, obj), *self._next_setup()]
        return (RawEvent(name=f"response/{method}", raw=obj),)

    def _fail_handshake(self, code: str, message: str, obj: Any) -> list[Event]:
        turn = self._turn
        self._phase, self._turn, self._setup, self._step = "idle", None, [], None
        if self.opened is not None and not self.opened.is_set():  # begun by open_session: its host learns why
            self.open_failure = (code, message)
            self.opened.set()
            if turn is None:
                return [Diagnostic(code=code, detail=message, raw=obj)]
        return [TurnFailed(code=code, message=message, raw=obj)]

    def _initialized(self, result: Any, error: Any, obj: dict[str, Any]) -> list[Event]:
        if error is not None:
            return self._fail_handshake("acp_initialize_failed", _rpc_message(error), obj)
        if result.get("protocolVersion") != PROTOCOL_VERSION:
            version = result.get("protocolVersion")
            return self._fail_handshake(
                "unsupported_protocol_version", f"the agent speaks ACP version {version!r}", obj
            )
        caps = result.get("agentCapabilities")
        self._capabilities = caps if isinstance(caps, dict) else {}
        params: dict[str, Any] = {"cwd": self._cwd, "mcpServers": [dict(s) for s in self._options.mcp_servers]}
        if self._resume is not None:
            if self._capabilities.get("loadSession") is not True:
                return self._fail_handshake(
                    "resume_unsupported", "the agent cannot load a session (no loadSession capability)", obj
                )
            self._updates.replaying = True
            self._out.append(self._request("session/load", {"sessionId": self._resume, **params}))
        else:
            self._out.append(self._request("session/new", params))
        return [RawEvent(name="initialize", raw=obj)]

    def _opened(self, method: str, result: Any, error: Any, obj: dict[str, Any]) -> list[Event]:
        # A loaded session's replay ends when the prompt is written (drain_output), not here.
        self._replay_until_prompt = method == "session/load" and error is None
        self._updates.replaying = self._replay_until_prompt
        if error is not None:
            code = rpc_error_code(error)
            code = code if code == "acp_auth_required" else f"acp_{method.replace('/', '_')}_failed"
            return self._fail_handshake(code, _rpc_message(error), obj)
        sid = result.get("sessionId") if method == "session/new" else self._resume
        if not isinstance(sid, str) or not sid:
            return self._fail_handshake("invalid_session_id", "the agent opened no session id", obj)
        self.session_id = sid
        self._phase = "ready"
        self.offer = {key: result[key] for key in OFFER_KEYS if key in result}
        steps, refused = setup_requests(self.offer, sid, self._model, self._mode)
        if refused is not None:
            return self._fail_handshake("model_not_set", refused, obj)
        self._setup = steps
        events: list[Event] = []
        if self._turn is None and self.opened is not None:
            self._announce = True  # no turn yet: the session is announced with the first prompt's output
        else:
            events.append(SessionStarted(session_id=sid, model=self._model, raw=obj))
        return events + self._next_setup()

    def _next_setup(self) -> list[Event]:
        """The next set-up request, or (none left) the handshake's end: the waiting turn's prompt."""
        self._step = None
        if self._setup:
            self._step = self._setup.pop(0)
            self._out.append(self._request(*self._step))
            return []
        if self.opened is not None:
            self.opened.set()
        return self._send_turn()

    def _send_turn(self) -> list[Event]:
        turn, self._turn = self._turn, None
        if turn is None:
            return []
        try:
            blocks = self._blocks(turn, check=True)
        except AgentrtError as exc:
            return [TurnFailed(code=exc.code, message=exc.detail)]
        self._out.append(self._prompt(blocks))
        return []
