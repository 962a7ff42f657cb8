"""Requests an ACP agent sends its host, held from the line that asks until the one that answers.

Each becomes a :class:`~agentrt.events.ControlRequest` keyed by its JSON-RPC
id as JSON text (so ``1`` and ``"1"`` stay apart): the permission request as
``can_use_tool`` (answered through the host's permission policy), every other
by its method (file access answered here when the options enable it, the
rest ``method not found``).  A request is answered once; an answer for one
already answered, or never asked, writes nothing.  On a cancel, every
permission request still open is answered ``cancelled`` (the spec asks it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from agentrt.events import ControlRequest, Diagnostic, Event

from . import _fs
from ._options import AcpOptions
from ._rpc import dumps
from ._turn import can_use_tool, permission_outcome

__all__ = ["AgentRequests", "PERMISSION"]

PERMISSION = "session/request_permission"
_NOT_FOUND = {"code": -32601, "message": "Method not found"}


class AgentRequests:
    """The agent's open requests of one host codec, and their answers as JSON-RPC lines."""

    def __init__(self, options: AcpOptions) -> None:
        self._options = options
        self._open: dict[str, tuple[Any, str, Any]] = {}  # request_id -> (JSON-RPC id, method, params)

    @property
    def open(self) -> Mapping[str, tuple[Any, str, Any]]:
        """The requests not answered yet: ``request_id`` to (JSON-RPC id, method, params), in arrival order."""
        return dict(self._open)

    def decode(self, obj: dict[str, Any], method: str) -> Sequence[Event]:
        """The event for the request ``obj`` (its ``method`` a string, its ``id`` present), kept open until answered."""
        rid = obj["id"]
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return (Diagnostic(code="unexpected_output_shape", detail="request id is not a string or number", raw=obj),)
        key = orjson.dumps(rid).decode()  # keeps 1 and "1" apart
        params = obj.get("params")
        params = params if isinstance(params, dict) else {}
        self._open[key] = (rid, method, params)
        if method == PERMISSION:
            return (ControlRequest(request_id=key, subtype="can_use_tool", request=can_use_tool(params), raw=obj),)
        return (ControlRequest(request_id=key, subtype=method, request=params, raw=obj),)

    def encode_response(self, request: Any, response: Mapping[str, Any] | None, error: str | None) -> bytes | None:
        """The JSON-RPC response to ``request`` (``None`` when it is not open).

        A permission request (``can_use_tool``) gets the option of the kind the
        decision asks for (``allow_once`` then ``allow_always``; ``reject_once``
        then ``reject_always`` for a denial or an error), else ``cancelled``.
        Any other request answered with an error gets ``method not found``.
        """
        key = request.request_id if isinstance(request, ControlRequest) else None
        entry = self._open.pop(key, None) if isinstance(key, str) else None
        if entry is None:
            return None
        rid, method, params = entry
        if method == PERMISSION:
            allow = error is None and response is not None and response.get("behavior") == "allow"
            return dumps({"jsonrpc": "2.0", "id": rid, "result": {"outcome": permission_outcome(params, allow)}})
        if error is not None or response is None:
            return dumps({"jsonrpc": "2.0", "id": rid, "error": {**_NOT_FOUND, "data": {"method": method}}})
        return dumps({"jsonrpc": "2.0", "id": rid, "result": dict(response)})

    async def answer(self, request: ControlRequest, cwd: str) -> bytes | None:
        """The answer to a file request, when the options enable it (confined to ``cwd``); ``None`` for the rest."""
        entry = self._open.get(request.request_id)
        if entry is None:
            return None
        rid, method, params = entry
        if not _fs.serves(method, self._options):
            return None
        del self._open[request.request_id]
        return await _fs.answer(method, rid, params, cwd, self._options)

    def cancel_permissions(self) -> list[bytes]:
        """``cancelled`` for every permission request still open, which are then answered."""
        lines = []
        for key, (rid, method, _params) in list(self._open.items()):
            if method == PERMISSION:
                del self._open[key]
                lines.append(dumps({"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "cancelled"}}}))
        return lines
