"""The bridge's permission policy when the outer dialect can ask its client (ACP; stream-json when told)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from .permissions import PermissionDecision, PermissionRequest

__all__ = ["AskTheClient"]

_ASK_TIMEOUT = 50.0  # a client's permission answer; under the conversation's own 60 s policy bound


class AskTheClient:
    """The hosted CLI's permission policy when the outer dialect can ask its client.

    ACP always can; stream-json when its host passed ``--permission-prompt-tool stdio``.

    The outer codec builds the request (``permission_request``) and recognises
    the answer (``permission_answer``); the bridge's reader hands every input
    object to :meth:`take` first.  Every wait is bounded, and a request still
    open when its turn ends or the input closes is denied.
    """

    def __init__(self, outer: Any, send: Callable[[Sequence[Mapping[str, Any]]], Awaitable[None]]) -> None:
        self._outer = outer
        self._send = send
        self._waiting: dict[Any, tuple[trio.Event, list[tuple[PermissionDecision, str]]]] = {}
        self._closed = False

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        return (await self.decide(request))[0]

    async def decide(self, request: PermissionRequest) -> tuple[PermissionDecision, str]:
        """The decision and who made it (recorded as ``by``): ``user``, ``user:always`` (the client chose to
        allow always, as ``run`` records its ``a`` answer), ``always`` (covered by that answer), ``timeout``,
        ``ask_failed`` (its turn ended first), ``no_client`` (the client closed its input)."""
        if self._closed:
            return PermissionDecision(allow=False, message="the client closed its input"), "no_client"
        asked = self._outer.permission_request(request)
        if isinstance(asked, PermissionDecision):  # the client chose "always" for this tool earlier
            return asked, "always" if asked.allow else "no_client"
        rid, message = asked
        done, answer = trio.Event(), list[tuple[PermissionDecision, str]]()
        self._waiting[rid] = (done, answer)
        try:
            await self._send([message])
            with trio.move_on_after(_ASK_TIMEOUT):
                await done.wait()
        finally:
            self._waiting.pop(rid, None)
        if answer:
            return answer[0]
        return PermissionDecision(allow=False, message="the client did not answer in time"), "timeout"

    def take(self, obj: Any) -> bool:
        """True when ``obj`` answered one of our requests (the waiting policy call gets the decision).

        The outer codec's ``permission_answer`` gives ``(id, decision)`` or ``(id, decision, by)``.
        """
        got = self._outer.permission_answer(obj)
        if got is None:
            return False
        rid, decision, *by = got
        self._resolve(rid, decision, by[0] if by else "user")
        return True

    def release_all(self, message: str) -> None:
        """Deny every request still waiting (its turn ended, or the client is gone)."""
        for rid in list(self._waiting):
            self._resolve(rid, PermissionDecision(allow=False, message=message), "ask_failed")

    def close(self) -> None:
        """The client is gone: deny what waits and every later request."""
        self._closed = True
        for rid in list(self._waiting):
            self._resolve(rid, PermissionDecision(allow=False, message="the client closed its input"), "no_client")

    def _resolve(self, rid: Any, decision: PermissionDecision, by: str) -> None:
        slot = self._waiting.get(rid)
        if slot is not None and not slot[0].is_set():
            slot[1].append((decision, by))
            slot[0].set()
