"""The bridge and a hosted ACP agent: its session opened before the client's is answered, its settings forwarded.

An ACP agent (Gemini CLI, codex-acp, claude-agent-acp) says what a session can
switch to (``models``, ``modes``, ``configOptions``) only in its answer to
``session/new`` / ``session/load``.  So when the bridge's client opens or
loads a session, the bridge has the hosted agent complete ``initialize`` and
its own ``session/new`` / ``session/load`` first (:func:`open_hosted_session`,
bounded by the agent's first-output bound) and answers with what the agent
offers; the client's ``session/set_model``, ``session/set_mode`` and
``session/set_config_option`` go to the agent in its session
(:func:`forward`), and its answer (or error) goes back.

The dialect's host codec does the protocol (``open_session``, ``forward``:
``agentrt_acp``); this module only writes to the process and waits.  A
dialect whose codec has neither (stream-json) opens its session at the first
prompt, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from ._codec_capabilities import KeepsHostCodec, OpensSessionEarly
from .errors import AgentrtError

__all__ = ["FORWARD_BOUND", "OPEN_BOUND", "HostedAgent", "can_open_early", "forward", "hosted_codec",
           "open_hosted_session"]

#: How long the hosted agent has to open its session when its first-output bound is off.
OPEN_BOUND = 120.0
#: How long it has to answer a forwarded request.
FORWARD_BOUND = 30.0
_STDERR_SHOWN = 600  # characters of the agent's last stderr in a failure's message
_METHODS = {"mode": "session/set_mode", "model": "session/set_model", "option": "session/set_config_option"}


class HostedAgent:
    """The bridge's side of a hosted ACP agent for one ACP client (``outer``, its agent codec).

    :meth:`prepare` opens the hosted agent's session for a client's ``new`` or
    ``load`` and offers what it offers; :meth:`forward` passes a model, mode or
    config option switch on and relays the answer.  ``bound`` is the agent's
    first-output bound (``None``: :data:`OPEN_BOUND`).
    """

    def __init__(self, outer: Any, bound: float | None) -> None:
        self._outer = outer
        self._bound = bound

    async def prepare(self, conv: Any, _switch: Any) -> None:
        """Open the hosted agent's session (raises why it could not); the client is then offered its options."""
        offer = await open_hosted_session(conv, self._bound)
        if offer is not None:
            self._outer.options.use_hosted(offer)

    async def forward(self, send: Callable[[Sequence[Mapping[str, Any]]], Awaitable[None]], conv: Any,
                      switch: Any) -> None:
        """Send the client's switch to the hosted agent; its answer (or why none came) goes to the client.

        What it accepted holds for the hosted agent's later processes too (the dialect sets it once
        their session is open): a model (``set_model``, or the model config option) and a mode.
        """
        method = _METHODS.get(switch.kind)
        if method is None:  # the bridge's own model option: never offered with a hosted agent's
            await send(self._outer.answer_switch(switch.kind, switch.request_id, "rpc_invalid_params: not offered"))
            return
        value: Any = {"mode": switch.mode, "model": switch.model}.get(switch.kind, switch.option)
        if switch.kind == "option":
            params: dict[str, Any] = {"configId": value[0], "value": value[1]}
        else:
            params = {"modeId": value} if switch.kind == "mode" else {"modelId": value}
        try:
            response = await forward(conv, method, params)
        except AgentrtError as exc:
            await send(self._outer.answer_switch(switch.kind, switch.request_id, f"{exc.code}: {exc.detail}"))
            return
        if "error" not in response:
            self._remember(conv, switch.kind, value)
        await send(self._outer.answer_forwarded(switch.kind, switch.request_id, value, response))

    def _remember(self, conv: Any, kind: str, value: Any) -> None:
        dialect = conv.dialect
        if kind == "mode":
            dialect.session_mode = value
        elif kind == "model":
            dialect.session_model = value
        elif kind == "option":
            options = self._outer.options.config_options()
            if any(o.get("id") == value[0] and o.get("category") == "model" for o in options):
                dialect.session_model = value[1]


def hosted_codec(conv: Any) -> OpensSessionEarly | None:
    """The host codec of ``conv``'s current process when it can open sessions early, else ``None``."""
    dialect = conv.dialect
    if not isinstance(dialect, KeepsHostCodec):
        return None
    codec = dialect.current_host_codec
    return codec if isinstance(codec, OpensSessionEarly) else None


def can_open_early(dialect: Any) -> bool:
    """True when ``dialect``'s host codecs open sessions before a turn (ACP)."""
    return isinstance(dialect, KeepsHostCodec) and isinstance(dialect.host_codec(), OpensSessionEarly)


async def open_hosted_session(conv: Any, bound: float | None) -> Mapping[str, Any] | None:
    """Have the hosted agent open its session now; what it offers, or ``None`` (its dialect opens at the prompt).

    Waits at most ``bound`` seconds (:data:`OPEN_BOUND` when ``None``).
    Raises :class:`~agentrt.errors.AgentrtError`: the handshake's own failure
    (``acp_initialize_failed``, ``acp_auth_required``, ``acp_session_load_failed``,
    ``model_not_set``...), ``exit_before_result`` when the agent exits first
    (with its last stderr), ``session_open_timeout`` when the bound passes.
    """
    codec = hosted_codec(conv)
    proc = conv.process
    if codec is None or proc is None:
        return None
    data = codec.open_session()
    if data is not None:
        await proc.send(data)
    await _until(codec.opened, proc, bound or OPEN_BOUND, "open its session")
    if codec.open_failure is not None:
        raise AgentrtError(*codec.open_failure)
    offer: Mapping[str, Any] = codec.offer
    return offer


async def forward(conv: Any, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Send the client's request ``method`` to the hosted agent's open session; the agent's JSON-RPC response.

    Raises ``session_not_open`` when the agent has no open session (its process
    was replaced since and has not been prompted yet), ``exit_before_result`` or
    ``session_open_timeout`` as :func:`open_hosted_session`.
    """
    codec = hosted_codec(conv)
    proc = conv.process
    sent = None
    if codec is not None and proc is not None and not proc.exited.is_set():
        sent = codec.forward(method, params)
    if sent is None:
        raise AgentrtError("session_not_open", "the hosted agent has no open session; send a prompt first")
    line, slot = sent
    await proc.send(line)
    await _until(slot.done, proc, FORWARD_BOUND, f"answer {method}")
    response: dict[str, Any] = slot.response
    return response


async def _until(event: trio.Event, proc: Any, bound: float, what: str) -> None:
    """Wait for ``event``; raise when the process exits first or ``bound`` seconds pass."""

    async def exited(scope: trio.CancelScope) -> None:
        await proc.exited.wait()
        scope.cancel()

    with trio.move_on_after(bound):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(exited, nursery.cancel_scope)
            await event.wait()
            nursery.cancel_scope.cancel()
    if event.is_set():
        return
    if proc.exited.is_set():
        from .masking import mask_text

        tail = mask_text(proc.stderr_tail().decode("utf-8", "replace").strip()[-_STDERR_SHOWN:])
        said = f"; its last words: {tail}" if tail else ""
        raise AgentrtError("exit_before_result", f"the hosted agent exited before it could {what}{said}")
    raise AgentrtError(
        "session_open_timeout",
        f"the hosted agent did not {what} within {bound:g} s (a slow start: raise the agent's "
        "first_output_timeout; no answer at all: check its protocol setting)",
    )
