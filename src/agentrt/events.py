"""The normalized event model: one tagged union, keyed by ``type`` on the wire.

Every dialect decodes its peer's output into these events, every sink consumes
them, and the same JSON form is used by ``agentrt run --json``, the database
and the web UI.  Events are frozen attrs classes with slots; they are cheap to
build because the host path builds one per protocol line.

Nothing a dialect carries is lost: each event has a ``raw`` attribute holding
the source JSON object (by reference, not copied).  A dialect's typed fast path
may instead hand the event its source line, as ``bytes`` (a JSON value never
is bytes): ``raw`` then parses it on first access, with the framing's rules,
and keeps the result, so a consumer that never looks at ``raw`` never pays for
building it.  ``raw`` is not part of the JSON form unless asked for
(``to_json(event, raw=True)``).  In the same way, :class:`ToolUse` ``input`` and
:class:`ToolResult` ``content`` may be handed the value's bytes (an
:class:`agentrt.dialect.JsonFragment`), parsed on first read; every reader,
``==`` and ``repr`` and the JSON form included, sees only the parsed value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Union, get_args

import attrs

from . import _eventjson
from ._json.lazy_fields import lazy_field

__all__ = [
    "Usage",
    "Event",
    "SessionStarted",
    "TurnStarted",
    "TextDelta",
    "ThinkingDelta",
    "ToolUse",
    "ToolResult",
    "Status",
    "ControlRequest",
    "TurnCompleted",
    "TurnFailed",
    "Diagnostic",
    "ProcessExited",
    "RawEvent",
    "Lifecycle",
    "StateChanged",
    "Envelope",
    "EventBatch",
    "AnyEvent",
    "EVENT_TYPES",
    "to_json",
    "from_json",
    "envelope_to_json",
]


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage of a turn; absent counts are ``None`` (never guessed)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        def add(a: int | None, b: int | None) -> int | None:
            if a is None:
                return b
            if b is None:
                return a
            return a + b

        return Usage(
            input_tokens=add(self.input_tokens, other.input_tokens),
            output_tokens=add(self.output_tokens, other.output_tokens),
            cache_read_input_tokens=add(self.cache_read_input_tokens, other.cache_read_input_tokens),
            cache_creation_input_tokens=add(
                self.cache_creation_input_tokens, other.cache_creation_input_tokens
            ),
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Usage:
        """Read the usage keys that hold integers; ignore anything else."""

        def num(key: str, *alts: str) -> int | None:
            for k in (key, *alts):
                v = data.get(k)
                if isinstance(v, int) and not isinstance(v, bool):
                    return v
            return None

        return cls(
            input_tokens=num("input_tokens", "prompt_tokens"),
            output_tokens=num("output_tokens", "completion_tokens"),
            cache_read_input_tokens=num("cache_read_input_tokens"),
            cache_creation_input_tokens=num("cache_creation_input_tokens"),
        )

    def to_dict(self) -> dict[str, int]:
        """The counts that are known, as a plain dict."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


@attrs.frozen(kw_only=True)
class Event:
    """Base of every event.  ``type`` is the tag of the JSON form.

    ``raw`` (the constructor's keyword) is the source protocol object, or the
    source line as ``bytes``, parsed on first read (see the module docstring).
    """

    type: ClassVar[str] = "event"
    # Stored privately so that `raw` can resolve a source line once, on first read.
    _raw: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def raw(self) -> Any:
        """The source protocol object this event was decoded from (``None`` if built directly)."""
        value = self._raw
        if type(value) is bytes:
            from ._jsonline import parse_line

            value = parse_line(value)
            # Frozen for users; caching the parsed object changes nothing they see.
            object.__setattr__(self, "_raw", value)
        return value


@attrs.frozen(kw_only=True)
class SessionStarted(Event):
    """The agent established its native (resumable) session id."""

    type: ClassVar[str] = "session_started"
    session_id: str
    model: str | None = None


@attrs.frozen(kw_only=True)
class TurnStarted(Event):
    """The runtime wrote a user turn to the agent (one write attempt)."""

    type: ClassVar[str] = "turn_started"
    turn: int
    prompt: str


@attrs.frozen(kw_only=True)
class TextDelta(Event):
    """A piece of the assistant's reply text, in order."""

    type: ClassVar[str] = "text_delta"
    text: str
    index: int = 0


@attrs.frozen(kw_only=True)
class ThinkingDelta(Event):
    """A piece of the model's reasoning, where the agent exposes it."""

    type: ClassVar[str] = "thinking_delta"
    text: str
    index: int = 0


@attrs.frozen(kw_only=True)
class ToolUse(Event):
    """The agent calls (or started calling) a tool; ``summary`` is a bounded label."""

    type: ClassVar[str] = "tool_use"
    id: str
    name: str
    input: Mapping[str, Any] = attrs.field(factory=dict)
    summary: str = ""


lazy_field(ToolUse, "input")


@attrs.frozen(kw_only=True)
class ToolResult(Event):
    """The result of a tool call, as the agent reported it."""

    type: ClassVar[str] = "tool_result"
    tool_use_id: str
    content: Any = None
    is_error: bool = False


lazy_field(ToolResult, "content")


@attrs.frozen(kw_only=True)
class Status(Event):
    """Progress the user should see: retries, rate limits, permission denials."""

    type: ClassVar[str] = "status"
    kind: str
    label: str = ""
    detail: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ControlRequest(Event):
    """The agent asks its host a question (e.g. may I use this tool?).

    The conversation answers it through the permission policy; sinks only see it.
    """

    type: ClassVar[str] = "control_request"
    request_id: str
    subtype: str
    request: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TurnCompleted(Event):
    """The terminal event of a successful turn."""

    type: ClassVar[str] = "turn_completed"
    session_id: str | None = None
    usage: Usage | None = None
    result: str | None = None


@attrs.frozen(kw_only=True)
class TurnFailed(Event):
    """The terminal event of a failed turn, with a stable code."""

    type: ClassVar[str] = "turn_failed"
    code: str
    message: str = ""
    usage: Usage | None = None


@attrs.frozen(kw_only=True)
class Diagnostic(Event):
    """Something worth knowing that is not part of the reply (never rendered as text)."""

    type: ClassVar[str] = "diagnostic"
    code: str
    detail: str = ""


@attrs.frozen(kw_only=True)
class ProcessExited(Event):
    """The agent process ended; ``requested`` is true when we asked it to stop."""

    type: ClassVar[str] = "process_exited"
    returncode: int | None = None
    signal: int | None = None
    requested: bool = False


@attrs.frozen(kw_only=True)
class RawEvent(Event):
    """A protocol object the dialect does not interpret, kept whole in ``raw``."""

    type: ClassVar[str] = "raw"
    name: str


@attrs.frozen(kw_only=True)
class Lifecycle(Event):
    """A lifecycle event of a long-lived instance (e.g. a FastAgent bot)."""

    type: ClassVar[str] = "lifecycle"
    kind: str
    message: str = ""
    pid: int | None = None
    timestamp: str | None = None
    data: Mapping[str, Any] = attrs.field(factory=dict)
    agent_id: str | None = None


@attrs.frozen(kw_only=True)
class StateChanged(Event):
    """A supervised instance moved from one state to another."""

    type: ClassVar[str] = "state_changed"
    state: str
    previous: str | None = None
    reason: str = ""


AnyEvent = Union[
    SessionStarted,
    TurnStarted,
    TextDelta,
    ThinkingDelta,
    ToolUse,
    ToolResult,
    Status,
    ControlRequest,
    TurnCompleted,
    TurnFailed,
    Diagnostic,
    ProcessExited,
    RawEvent,
    Lifecycle,
    StateChanged,
]

#: Every event class by its ``type`` tag (derived from :data:`AnyEvent`, so the two never disagree).
EVENT_TYPES: dict[str, type[Event]] = {cls.type: cls for cls in get_args(AnyEvent)}


@attrs.frozen(kw_only=True)
class Envelope:
    """One event in transit: where it came from, its order, and when.

    ``source`` is the conversation or instance id; ``seq`` increases by one per
    event of that source; ``mono`` is monotonic seconds (``trio.current_time``
    inside trio) and ``wall`` is Unix time.
    """

    source: str
    seq: int
    mono: float
    wall: float
    event: Event


@attrs.frozen(kw_only=True)
class EventBatch:
    """The events decoded from one received chunk, as sinks receive them.

    The host path decodes many events per chunk; wrapping each in its own
    envelope would cost more than decoding it, so a batch carries the envelope
    fields once: event ``i`` has sequence number ``first_seq + i`` and shares
    the batch's times.  ``envelopes()`` gives per-event envelopes when wanted.
    """

    source: str
    first_seq: int
    mono: float
    wall: float
    events: tuple[Event, ...]

    def envelopes(self) -> list[Envelope]:
        """Per-event envelopes of this batch, in order."""
        return [
            Envelope(source=self.source, seq=self.first_seq + i, mono=self.mono,
                     wall=self.wall, event=ev)
            for i, ev in enumerate(self.events)
        ]


def _conv() -> Any:
    return _eventjson.converter()


def to_json(event: Event, *, raw: bool = False) -> dict[str, Any]:
    """The JSON form of an event: a dict whose ``type`` key names the class."""
    data = _eventjson.event_dict(event)
    if raw:
        data["raw"] = event.raw
    return data


def from_json(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from its JSON form; unknown ``type`` is a ``ValueError``."""
    from .errors import AgentrtError

    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise AgentrtError("unknown_event_type", f"unknown event type {kind!r}")
    body = {k: v for k, v in data.items() if k != "type" and k != "raw"}
    result: Event = _conv().structure(body, cls)
    if "raw" in data:
        object.__setattr__(result, "_raw", data["raw"])
    return result


def envelope_to_json(env: Envelope, *, raw: bool = False) -> dict[str, Any]:
    """The JSON form of an envelope: source, seq, times and the event."""
    return {
        "source": env.source,
        "seq": env.seq,
        "mono": env.mono,
        "wall": env.wall,
        "event": to_json(env.event, raw=raw),
    }
