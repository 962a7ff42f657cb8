"""The optional parts of an agent codec, each a :class:`~typing.Protocol` a host checks with ``isinstance``.

Re-exported by :mod:`agentrt.dialect`, where they are documented with the
rest of the dialect contract.  An :class:`~agentrt.dialect.AgentCodec` has one
of these parts by defining its members (no registration, no base class): the
host that can use it (``agentrt agent``, ``agentrt bridge``, a process that
could not start) asks ``isinstance(codec, Part)`` once and then calls it.
Each is runtime-checkable, so the check looks at the members' presence only.

Two parts of the other sides live here too: :class:`OpensSessionEarly`, a
host codec that opens its agent's session before the first turn, and
:class:`KeepsHostCodec`, a dialect that keeps the host codec it made last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from .events import Event
from .permissions import PermissionDecision, PermissionRequest

__all__ = [
    "AsksPermission",
    "DefersNewSessions",
    "KeepsHostCodec",
    "OpensSessionEarly",
    "OpensSessions",
    "PartialMessages",
    "RepliesToStartupError",
]


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
class DefersNewSessions(OpensSessions, Protocol):
    """An :class:`OpensSessions` agent codec that can hold its answer to a new session (ACP).

    A host that opens its hosted agent's session first (``agentrt bridge``
    hosting an ACP agent) sets :attr:`defer_new`: the ``new`` switch from
    :meth:`take_opened` then carries its request id and is answered with
    :meth:`answer_switch` once the hosted session is open;
    :meth:`answer_forwarded` relays the hosted agent's answer to a switch the
    host forwarded to it.
    """

    defer_new: bool

    def answer_forwarded(self, kind: str, rid: Any, value: Any, response: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The objects answering switch ``rid`` with the hosted agent's ``response`` (an error passed on as given)."""
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


@runtime_checkable
class OpensSessionEarly(Protocol):
    """A host codec that opens its agent's session before the first turn and forwards session requests (ACP).

    :meth:`open_session` gives the lines that begin the handshake now
    (``None``: one has begun); when it ends, :attr:`opened` is set, with
    :attr:`offer` filled (what the session can switch to) or
    :attr:`open_failure` saying why as ``(code, message)``.  :meth:`forward`
    gives the line sending a client's session request to the open session
    and the slot whose ``done`` event and ``response`` carry the agent's
    answer; ``None`` when no session is open.
    """

    opened: Any
    """A ``trio.Event`` made by :meth:`open_session` (``None`` before)."""
    open_failure: tuple[str, str] | None
    offer: Mapping[str, Any]

    def open_session(self) -> bytes | None:
        """The handshake's first lines, to write now; ``None`` once a handshake has begun."""
        ...

    def forward(self, method: str, params: Mapping[str, Any]) -> tuple[bytes, Any] | None:
        """``(line, slot)`` sending request ``method`` to the open session; ``None``: no session is open."""
        ...


@runtime_checkable
class KeepsHostCodec(Protocol):
    """A dialect that keeps the host codec it made last (ACP): the one of a conversation's newest process.

    A host that talks to the running process's codec (``agentrt bridge``:
    :class:`OpensSessionEarly`) reaches it through the conversation's dialect.
    """

    current_host_codec: Any
    """The host codec :meth:`host_codec` made last; ``None`` before the first."""

    def host_codec(self) -> Any:
        """A fresh host codec (every :class:`~agentrt.dialect.Dialect` has it), kept as :attr:`current_host_codec`."""
        ...
