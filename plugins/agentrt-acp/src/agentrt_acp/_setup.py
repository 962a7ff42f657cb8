"""The session set-up a host asks of an ACP agent once its session is open: the model and the mode.

Pure functions over the ``session/new`` / ``session/load`` result (no I/O).
An agent lists its models either as ``models`` (``session/set_model``) or as
a session config option of category ``model`` (``configOptions``,
``session/set_config_option``; codex-acp does so).  :func:`setup_requests`
says which requests carry a wanted model and mode, or why the model cannot be
had.  :class:`Forwarded` is one request a host's own client sent on (the
bridge's ``session/set_model``...), with the agent's answer once it came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from agentrt.events import Diagnostic, Event, RawEvent

from ._rpc import rpc_message

__all__ = [
    "Forwarded", "OFFER_KEYS", "SETUP_METHODS", "model_option", "option_values", "setup_answered", "setup_requests",
    "switched",
]

#: The fields of a ``session/new`` / ``session/load`` result that say what the session can switch to.
OFFER_KEYS = ("models", "modes", "configOptions")
#: The requests :func:`setup_requests` makes.
SETUP_METHODS = ("session/set_model", "session/set_config_option", "session/set_mode")


class Forwarded:
    """A request sent to the agent for the host's client; :attr:`response` is the agent's whole answer."""

    def __init__(self, method: str, params: Mapping[str, Any]) -> None:
        self.method = method
        self.params = params
        self.done = trio.Event()
        #: The agent's JSON-RPC response (``result`` or ``error``), once it came.
        self.response: dict[str, Any] | None = None


def model_option(config_options: Any) -> Mapping[str, Any] | None:
    """The first ``select`` config option of category ``model``, if the agent offers one."""
    for option in config_options if isinstance(config_options, list) else ():
        if isinstance(option, dict) and option.get("category") == "model" and isinstance(option.get("id"), str):
            return option
    return None


def option_values(option: Mapping[str, Any]) -> list[str]:
    """The values a ``select`` option offers (options may come in named groups)."""
    out: list[str] = []
    for entry in option.get("options") or ():
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("value"), str):
            out.append(entry["value"])
        for inner in entry.get("options") or ():  # a group
            if isinstance(inner, dict) and isinstance(inner.get("value"), str):
                out.append(inner["value"])
    return out


def setup_requests(
    offer: Mapping[str, Any], session_id: str, model: str | None, mode: str | None
) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """The requests that set ``model`` and ``mode`` in an opened session, and why the model cannot be set.

    The model goes through ``session/set_model`` when the agent lists ``models``,
    else through ``session/set_config_option`` when it has a model option (and
    only when the value is among the option's and not already current; a value
    it does not offer is the returned reason, naming the ones it does).  The
    mode goes through ``session/set_mode`` when the agent lists it and it is not
    the current one.  Nothing is asked for what the agent does not offer.
    """
    steps: list[tuple[str, dict[str, Any]]] = []
    if model:
        option = model_option(offer.get("configOptions"))
        if isinstance(offer.get("models"), dict):
            steps.append(("session/set_model", {"sessionId": session_id, "modelId": model}))
        elif option is not None:
            values = option_values(option)
            if model not in values:
                offered = ", ".join(values[:32]) or "none"
                return [], f"the agent offers no model {model!r} (it offers: {offered})"
            if option.get("currentValue") != model:
                params = {"sessionId": session_id, "configId": option["id"], "value": model}
                steps.append(("session/set_config_option", params))
    modes = offer.get("modes")
    if mode and isinstance(modes, dict) and modes.get("currentModeId") != mode:
        known = {m.get("id") for m in modes.get("availableModes") or () if isinstance(m, dict)}
        if mode in known:
            steps.append(("session/set_mode", {"sessionId": session_id, "modeId": mode}))
    return steps, None


def switched(offer: Mapping[str, Any], method: str, params: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """``offer`` after a successful ``method`` with ``params`` (its ``result``): the current model or mode moved.

    ``session/set_config_option`` answers with every option (taken whole); the
    others answer nothing, so the value asked for becomes the current one.
    """
    out = dict(offer)
    if method == "session/set_config_option":
        options = result.get("configOptions") if isinstance(result, dict) else None
        if isinstance(options, list):
            out["configOptions"] = options
    elif method == "session/set_model" and isinstance(out.get("models"), dict):
        out["models"] = {**out["models"], "currentModelId": params.get("modelId")}
    elif method == "session/set_mode" and isinstance(out.get("modes"), dict):
        out["modes"] = {**out["modes"], "currentModeId": params.get("modeId")}
    return out


def setup_answered(method: str, error: Any, raw: Any) -> Event:
    """The event for the agent's answer to a set-up request: the answer as it came, or why it failed.

    A failure is a ``Diagnostic`` (``mode_not_set``, else ``model_not_set``),
    not the turn's end: the session goes on with the agent's own choice.
    """
    if error is None:
        return RawEvent(name=method, raw=raw)
    if method == "session/set_mode":
        return Diagnostic(code="mode_not_set", detail=f"the agent did not set the mode: {rpc_message(error)}", raw=raw)
    return Diagnostic(code="model_not_set", detail=f"the agent did not set the model: {rpc_message(error)}", raw=raw)
