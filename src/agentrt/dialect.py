"""Dialects: two-way codecs between agentrt's events and an agent CLI's JSON Lines.

A dialect has no I/O of its own.  The same object serves both sides of the wire:

* **host side** (agentrt drives a CLI): :meth:`HostCodec.encode_turn` gives the
  line to write for a user turn, :meth:`HostCodec.decode` turns each parsed
  output object into events.
* **agent side** (agentrt *is* a CLI): :meth:`AgentCodec.decode_input` reads a
  parsed input object, :meth:`AgentCodec.encode` turns events into output
  objects.

Codecs are created per conversation and may keep state (a stream-json decoder
remembers which text it already streamed).  Framing (splitting lines, the 4 MiB
cap, malformed lines) is not the codec's business: it receives parsed JSON,
unless it offers a :attr:`HostCodec.line_loader`, a typed first parse of each
line for its hot shapes.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

import attrs

from .events import ControlRequest, Event, TextDelta

__all__ = [
    "TextBlock",
    "ImageBlock",
    "DocumentBlock",
    "ContentBlock",
    "Turn",
    "Shutdown",
    "Interrupt",
    "InputError",
    "AgentInput",
    "HostCodec",
    "AgentCodec",
    "Dialect",
    "content_text",
    "make_text_delta",
]


@attrs.frozen(kw_only=True)
class TextBlock:
    """Plain text content."""

    text: str


@attrs.frozen(kw_only=True)
class ImageBlock:
    """An image, base64-encoded (``media_type`` such as ``image/png``)."""

    media_type: str
    data: str


@attrs.frozen(kw_only=True)
class DocumentBlock:
    """A document, base64-encoded (``media_type`` such as ``application/pdf``)."""

    media_type: str
    data: str


ContentBlock = Union[TextBlock, ImageBlock, DocumentBlock]


@attrs.frozen(kw_only=True)
class Turn:
    """One user turn: content blocks, in order."""

    content: tuple[ContentBlock, ...]

    @classmethod
    def text(cls, text: str) -> Turn:
        """A turn holding one text block."""
        return cls(content=(TextBlock(text=text),))


@attrs.frozen(kw_only=True)
class Shutdown:
    """The peer asked the agent to shut down gracefully."""


@attrs.frozen(kw_only=True)
class Interrupt:
    """The peer asked the agent to stop the turn it is running (the session goes on)."""


@attrs.frozen(kw_only=True)
class InputError:
    """An input line the agent must refuse, with a stable code."""

    code: str
    detail: str = ""


AgentInput = Union[Turn, Shutdown, Interrupt, InputError, None]
"""What :meth:`AgentCodec.decode_input` returns; ``None`` means "ignore this line"."""


def content_text(turn: Turn) -> str:
    """The text blocks of a turn joined with newlines (for display and storage)."""
    return "\n".join(b.text for b in turn.content if isinstance(b, TextBlock))


class HostCodec(abc.ABC):
    """Host side of a dialect, one instance per conversation."""

    line_loader: Callable[[bytes], Any] | None = None
    """Optional first parse of each output line, in place of ``orjson.loads``.

    The host path's framing calls it with one line's bytes (no ``\n``; JSON
    whitespace may surround it).  It returns any object this codec's
    :meth:`decode` and :meth:`decode_batch` understand: typically a compact
    private object for a hot line shape, decoded by a typed parser that skips
    building dicts, whose events carry the line itself (``bytes``) as
    ``raw``, parsed only if read; for other lines, the parsed JSON.  It raises :class:`ValueError`
    when the line is not JSON as it stands, and the framing's lenient path
    takes over.  The events must be exactly those of ``decode(parsed JSON)``
    (``check_dialect`` verifies this on its corpus).  ``None`` (the default):
    plain ``orjson.loads``.
    """

    @abc.abstractmethod
    def encode_turn(self, turn: Turn) -> bytes:
        """The bytes (one or more complete lines) that send ``turn`` to the CLI.

        Raise :class:`~agentrt.AgentrtError` (``unsupported_content_block``)
        for content the dialect cannot carry: nothing must be written then.
        """

    def encode_shutdown(self) -> bytes | None:
        """The graceful-shutdown line, or ``None`` when the dialect has none."""
        return None

    def encode_control_response(
        self, request: Any, response: Mapping[str, Any] | None, error: str | None
    ) -> bytes | None:
        """Answer a :class:`~agentrt.events.ControlRequest` (``None``: nothing to write)."""
        return None

    def encode_interrupt(self) -> bytes | None:
        """The line asking the agent to stop the running turn, or ``None`` when the protocol has none.

        :meth:`~agentrt.Conversation.cancel_turn` writes it and waits a few seconds
        for the turn's terminal event before stopping the process instead.
        """
        return None

    @abc.abstractmethod
    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one parsed output object (possibly none).

        Must never raise on well-formed JSON of an unexpected shape: unknown
        objects become :class:`~agentrt.events.RawEvent` or a diagnostic.
        """

    def start(self, *, resume: str | None, model: str | None, cwd: str) -> None:
        """Called once before the process this codec serves is spawned.

        Only a dialect that opens its session in band
        (:attr:`Dialect.session_in_band`) needs it: the session to resume, the
        model and the working directory then travel in the protocol, not in argv.
        """
        return None

    def drain_output(self) -> bytes | None:
        """Lines the codec owes the agent after decoding (``None``: nothing).

        For request/response protocols: a response that arrives may call for the
        next request (a handshake before the first turn's prompt).  The host
        calls this after each decoded chunk and writes what it returns.
        """
        return None

    async def answer_control(self, request: ControlRequest) -> bytes | None:
        """The line answering ``request`` when the dialect answers it itself, else ``None``.

        For agent requests that need the host's resources, not its policy (an ACP
        agent reading a file through its client).  May do bounded I/O; the host
        bounds the wait.  ``None``: the conversation answers (permission policy
        for ``can_use_tool``, an error otherwise) through
        :meth:`encode_control_response`.
        """
        return None

    def decode_batch(self, objs: Sequence[Any]) -> list[Event]:
        """Events for several parsed objects, in order (one received chunk's worth).

        The default calls :meth:`decode` per object.  A dialect may override it
        to inline its hot path: the host path calls this once per chunk, so a
        per-line Python call and a per-line tuple can be saved.
        """
        out: list[Event] = []
        for obj in objs:
            out.extend(self.decode(obj))
        return out

    def finish(self) -> Sequence[Event]:
        """Events owed at end of output (e.g. a dangling partial message)."""
        return ()


class AgentCodec(abc.ABC):
    """Agent side of a dialect, one instance per agent process."""

    @abc.abstractmethod
    def decode_input(self, obj: Any) -> AgentInput:
        """Read one parsed input object."""

    @abc.abstractmethod
    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """Output objects for one event (possibly none), each one JSON line."""


class Dialect(abc.ABC):
    """A named protocol; a factory of codecs.

    ``compat_args`` are added to the CLI's argv before ``--model`` (stream-json
    needs ``--output-format stream-json ...``).
    """

    name: str = ""
    compat_args: tuple[str, ...] = ()
    session_in_band: bool = False
    """True when the protocol opens, resumes and configures its session itself
    (ACP): no ``--model``/``--resume`` in argv, :meth:`HostCodec.start` instead."""

    @abc.abstractmethod
    def host_codec(self) -> HostCodec:
        """A fresh host-side codec."""

    @abc.abstractmethod
    def agent_codec(self) -> AgentCodec:
        """A fresh agent-side codec."""


def _text_delta_maker() -> Callable[[str, int, Any], TextDelta]:
    # attrs' frozen ``__init__`` sets each slot through ``object.__setattr__``;
    # filling the slots through their descriptors halves the cost of the one
    # object built per delta line.  Used only when the class is exactly what it
    # relies on (slots ``raw``/``text``/``index``, no validator or converter)
    # and the result equals a normally built event; else the normal constructor.
    def normal(text: str, index: int, raw: Any) -> TextDelta:
        return TextDelta(text=text, index=index, raw=raw)

    try:
        fields = attrs.fields(TextDelta)
        if [f.name for f in fields] != ["_raw", "text", "index"] or any(
            f.validator is not None or f.converter is not None for f in fields
        ):
            return normal
        new = object.__new__
        set_text = TextDelta.__dict__["text"].__set__
        set_index = TextDelta.__dict__["index"].__set__
        set_raw = Event.__dict__["_raw"].__set__

        def fast(text: str, index: int, raw: Any) -> TextDelta:
            ev = new(TextDelta)
            set_text(ev, text)
            set_index(ev, index)
            set_raw(ev, raw)
            return ev

        probe_raw: dict[str, Any] = {}
        probe = fast("p", 3, probe_raw)
        if probe == normal("p", 3, None) and probe.raw is probe_raw and repr(probe) == repr(normal("p", 3, None)):
            return fast
    except (AttributeError, KeyError, TypeError):
        pass
    return normal


make_text_delta: Callable[[str, int, Any], TextDelta] = _text_delta_maker()
"""``make_text_delta(text, index, raw)``: the same event as ``TextDelta(text=..., index=..., raw=...)``, cheaper.

For a dialect's hot path (one call per text-delta line): it fills the frozen
event's slots directly, about half the cost of the attrs constructor.
"""
