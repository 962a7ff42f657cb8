"""The optional parts of an agent codec, each a :class:`~typing.Protocol` a host checks with ``isinstance``.

Re-exported by :mod:`agentrt.dialect`, where they are documented with the
rest of the dialect contract.  An :class:`~agentrt.dialect.AgentCodec` has one
of these parts by defining its members (no registration, no base class): the
host that can use it (``agentrt agent``, ``agentrt bridge``, a process that
could not start) asks ``isinstance(codec, Part)`` once and then calls it.
Each is runtime-checkable, so the check looks at the members' presence only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from .events import Event
from .permissions import PermissionDecision, PermissionRequest

__all__ = ["AsksPermission", "OpensSessions", "PartialMessages", "RepliesToStartupError"]


@runtime_checkable
class PartialMessages(Protocol):
    """An agent codec that can stream partial messages (live deltas) besides complete ones.

    The host sets :attr:`partial` before the first input when its user asked
    for them (stream-json's ``--include-partial-messages``).
    """

    partial: bool
    """True: encode deltas as they come; False (the default): complete messages only."""


@runtime_checkable
class AsksPermission(Protocol):
    """An agent codec whose protocol can ask its client for a tool permission (stream-json, ACP).

    ``agentrt bridge`` then forwards the hosted CLI's tool requests to the
    client, unless :attr:`~agentrt.dialect.AgentCodec.asks_only_when_told`
    and the client did not ask for that.
    """

    asks_only_when_told: bool

    def permission_request(self, request: PermissionRequest) -> tuple[str, dict[str, Any]] | PermissionDecision:
        """The request to send the client, as ``(request id, message)``; or a decision it already made."""
        ...


@runtime_checkable
class OpensSessions(Protocol):
    """An agent codec whose client opens, loads and switches sessions in band (ACP).

    The host (``agentrt bridge``) sets :attr:`load_sessions` when it can
    resume a session, fills :attr:`options` with what the client may choose,
    takes the switches the client asked for after each input line
    (:meth:`take_opened`), answers each once it has switched
    (:meth:`answer_switch`), and replays a loaded session's history
    (:meth:`replay`) before answering its ``load``.
    """

    load_sessions: bool
    options: Any
    """What the client may pick per session (``models``, ``current_model``, ``modes``, ``current_mode``)."""

    def take_opened(self) -> list[tuple[str, Any, str, Any, str | None]]:
        """Session switches since the last call: ``(kind, request id, session id, value, cwd)``."""
        ...

    def answer_switch(
        self, kind: str, rid: Any, error: str | None = None, value: str | None = None
    ) -> list[dict[str, Any]]:
        """The objects answering switch ``rid`` (``error``: it failed)."""
        ...

    def replay(self, session_id: str, events: Iterable[Event]) -> list[dict[str, Any]]:
        """The objects that replay a recorded session's ``events`` to the client."""
        ...


@runtime_checkable
class RepliesToStartupError(Protocol):
    """An agent codec whose protocol cannot carry a bare startup-error line (JSON-RPC: ACP).

    A process that could not start then reads its input until the client's
    first request and answers it with :meth:`startup_error_reply`.
    """

    def startup_error_reply(self, obj: Any, code: str, message: str) -> dict[str, Any] | None:
        """The answer to input object ``obj`` saying the process could not start; ``None``: not a request."""
        ...
