"""Dialects: two-way codecs between agentrt's events and an agent CLI's JSON Lines.

This page is the whole contract a dialect author needs; ``docs/examples/
agentrt-example-dialect`` is a complete small dialect that passes
:func:`agentrt.testing.check_dialect`, and the suite's numbered clauses are
the contract's tests.

**What a dialect is.**  A :class:`Dialect` has a ``name`` and makes two codecs
with no I/O of their own, one per conversation (host) or per agent process
(agent).  A codec may keep state; two codecs never share any.  Framing
(splitting lines, the 4 MiB cap, malformed lines) is not the codec's business:
it receives parsed JSON and returns events or objects.

* **host side** (agentrt drives a CLI), :class:`HostCodec`, required:
  :meth:`~HostCodec.encode_turn` (the lines that send a user turn) and
  :meth:`~HostCodec.decode` (the events of one parsed output object, never
  raising).  Optional, with defaults that do nothing:
  :meth:`~HostCodec.encode_shutdown`,
  :meth:`~HostCodec.encode_control_response` (answering a
  :class:`~agentrt.events.ControlRequest` the agent sent) and
  :meth:`~HostCodec.finish` (events owed at end of output).
* **agent side** (agentrt *is* a CLI), :class:`AgentCodec`, required:
  :meth:`~AgentCodec.decode_input` (a parsed input object to a :class:`Turn`,
  :class:`Shutdown`, :class:`Interrupt`, :class:`InputError` or ``None``) and
  :meth:`~AgentCodec.encode` (an event to output objects).

**Declared capabilities.**  What a codec can do beyond the required methods
is declared, and the hosts check it with ``isinstance``, never with
``getattr``: a host codec whose protocol can end a running turn is
:class:`Interruptible`; an agent codec's optional parts are the protocols
:class:`PartialMessages` (live deltas on request), :class:`AsksPermission`
(asks its client for tool permissions), :class:`OpensSessions` (the client
opens, loads and switches sessions in band) and
:class:`RepliesToStartupError` (a JSON-RPC answer when the process cannot
start), plus two flags with defaults, :attr:`AgentCodec.asks_only_when_told`
and :attr:`AgentCodec.cancel_on_close`.  A codec has a protocol by defining
its members.

**One decode path.**  The host path reads a chunk of output at a time and
hands its complete lines, as bytes, to one method,
:meth:`HostCodec.decode_lines`, with a ``general(line)`` callback: the
framing's parse of one line (blank: nothing; not JSON: a
``malformed_output_line`` diagnostic) followed by :meth:`~HostCodec.decode`.
The default hands every line to ``general``, so a dialect that only writes
:meth:`~HostCodec.decode` is complete.  A dialect with hot lines overrides
:meth:`~HostCodec.decode_lines` to parse and decode the lines it knows in one
loop (a typed parse, :func:`text_delta_slots` to build a text event inline)
and hands the rest to ``general``.  That override is the only fast path there
is, and one clause of ``check_dialect`` holds it to the general path: over
its samples cut into chunks, ``decode_lines`` gives exactly the events
(``repr`` and ``raw``) of ``general`` on each line in turn.

**A dialect whose protocol is request/response** (the built-in example is
ACP, JSON-RPC over stdio): the agent may send requests the host answers, and
the host may send requests whose responses end a turn, with no core change per
dialect.  Four optional parts, all no-ops by default (awp-jsonl and
stream-json leave them so):

* :attr:`Dialect.session_in_band`: the protocol opens, resumes and configures
  its session itself; agentrt then puts no ``--model``/``--resume`` in argv
  and calls :meth:`HostCodec.start` with them before the process is spawned;
* :meth:`HostCodec.drain_output`: lines a decoded response calls for (the next
  handshake step); the host writes them after each decoded chunk, so
  :meth:`~HostCodec.encode_turn` may return the first handshake request and
  keep the turn until the session is open;
* :meth:`HostCodec.answer_control`: the answer to an agent request the
  dialect serves itself (bounded I/O, such as a confined file read), instead
  of the permission policy;
* :meth:`AgentCodec.drain_output`: on the agent side, objects owed to the
  host outside any event (handshake responses), written after each input.

``check_dialect`` plays both halves against each other through these hooks:
what one side's ``drain_output`` owes is fed to the other until the turn
arrives, so a handshake round trip passes the same clauses as a one-line turn.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Union, runtime_checkable

import attrs

from ._codec_capabilities import AsksPermission as AsksPermission
from ._codec_capabilities import DefersNewSessions as DefersNewSessions
from ._codec_capabilities import KeepsHostCodec as KeepsHostCodec
from ._codec_capabilities import OpensSessionEarly as OpensSessionEarly
from ._codec_capabilities import OpensSessions as OpensSessions
from ._codec_capabilities import PartialMessages as PartialMessages
from ._codec_capabilities import RepliesToStartupError as RepliesToStartupError
from ._json.lazy_fields import JsonFragment
from ._textdelta import make_text_delta as _make_text_delta
from ._textdelta import text_delta_slots as text_delta_slots
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
    "Interruptible",
    "AgentCodec",
    "PartialMessages",
    "AsksPermission",
    "OpensSessions",
    "DefersNewSessions",
    "RepliesToStartupError",
    "OpensSessionEarly",
    "KeepsHostCodec",
    "Dialect",
    "content_text",
    "make_text_delta",
    "text_delta_slots",
    "JsonFragment",
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


@runtime_checkable
class Interruptible(Protocol):
    """A host codec whose protocol can ask the agent to end the running turn (a declared capability).

    A :class:`HostCodec` is checked with ``isinstance(codec, Interruptible)``:
    one that defines :meth:`encode_interrupt` is.  Cancelling a turn
    (:meth:`~agentrt.Conversation.cancel_turn`, closing its stream, Ctrl-C in
    ``agentrt run``) writes the interrupt and gives the agent
    :data:`~agentrt.lowlevel.CANCEL_GRACE` seconds to end the turn itself (its
    terminal event, whatever its code, becomes ``turn_cancelled``) before the
    process is stopped.  A codec that is not interruptible gets the stop at once.
    """

    def encode_interrupt(self) -> bytes | None:
        """The line(s) asking the agent to end the running turn; ``None`` when it cannot be asked now."""
        ...


class HostCodec(abc.ABC):
    """Host side of a dialect, one instance per conversation.

    Required: :meth:`encode_turn`, :meth:`decode`.  Optional (defaults do
    nothing): :meth:`encode_shutdown`,
    :meth:`encode_control_response`, :meth:`finish`.  A codec whose protocol
    can end a running turn declares it by being :class:`Interruptible`.  The
    host path decodes through :meth:`decode_lines` (default: :meth:`decode`
    per line; override it for a dialect's hot lines).  Request/response
    protocols: :meth:`start`, :meth:`drain_output`, :meth:`answer_control`.
    """

    # -- required ------------------------------------------------------------------

    @abc.abstractmethod
    def encode_turn(self, turn: Turn) -> bytes:
        """The bytes (one or more complete lines) that send ``turn`` to the CLI.

        Raise :class:`~agentrt.AgentrtError` (``unsupported_content_block``)
        for content the dialect cannot carry: nothing must be written then.
        """

    @abc.abstractmethod
    def decode(self, obj: Any) -> Sequence[Event]:
        """Events for one parsed output object (possibly none).

        Must never raise on well-formed JSON of an unexpected shape: unknown
        objects become :class:`~agentrt.events.RawEvent` or a diagnostic.
        Each event keeps its source object as ``raw``.  A turn ends with
        exactly one terminal event, ``TurnCompleted`` or ``TurnFailed`` with
        a stable snake_case code.
        """

    # -- optional protocol parts -------------------------------------------------------

    def encode_shutdown(self) -> bytes | None:
        """The graceful-shutdown line, or ``None`` when the dialect has none."""
        return None

    def encode_control_response(
        self, request: Any, response: Mapping[str, Any] | None, error: str | None
    ) -> bytes | None:
        """Answer a :class:`~agentrt.events.ControlRequest` (``None``: nothing to write)."""
        return None

    def finish(self) -> Sequence[Event]:
        """Events owed at end of output (e.g. a dangling partial message)."""
        return ()

    # -- the host path: one chunk's lines ---------------------------------------------------

    def decode_lines(self, lines: Sequence[bytes], general: Callable[[bytes], Sequence[Event]]) -> list[Event]:
        """Events for one chunk's complete lines, in order: the one method the host path decodes through.

        ``lines`` are the chunk's complete lines as bytes (no ``\n`` but
        possibly a trailing one on a chunk of one line; JSON whitespace may
        surround them; blank lines included).  ``general(line)`` gives one
        line's events by the framing's rules and :meth:`decode` (nothing for a
        blank line, a ``malformed_output_line`` diagnostic for one that is not
        JSON); it may change the codec's state, as :meth:`decode` does.

        The default hands every line to ``general``.  Override it to parse and
        decode a dialect's hot lines in one loop (no per-line call, object or
        tuple between a typed parse and its event), handing the lines it does
        not take to ``general``.  The result must equal ``general`` applied to
        each line in turn (a clause of ``check_dialect``).
        """
        out: list[Event] = []
        for line in lines:
            out.extend(general(line))
        return out

    # -- request/response protocols (see the module docstring) ---------------------------------

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


class AgentCodec(abc.ABC):
    """Agent side of a dialect, one instance per agent process.

    Required: :meth:`decode_input`, :meth:`encode`.  Request/response
    protocols: :meth:`drain_output`.  Optional parts, each a protocol the
    host checks with ``isinstance``: :class:`PartialMessages`,
    :class:`AsksPermission`, :class:`OpensSessions`,
    :class:`RepliesToStartupError`; and two flags, below.
    """

    asks_only_when_told: bool = False
    """For an :class:`AsksPermission` codec: ask the client only when it said so
    (stream-json's ``--permission-prompt-tool stdio``), not by default."""

    cancel_on_close: bool = False
    """True for a connection-like protocol (ACP): when the input ends, the running
    turn is cancelled, since nobody is left to read its reply."""

    @abc.abstractmethod
    def decode_input(self, obj: Any) -> AgentInput:
        """Read one parsed input object."""

    @abc.abstractmethod
    def encode(self, event: Event) -> Sequence[Mapping[str, Any]]:
        """Output objects for one event (possibly none), each one JSON line."""

    def drain_output(self) -> Sequence[Mapping[str, Any]]:
        """Objects owed to the host outside any event, in order (default: none).

        For request/response protocols: :meth:`decode_input` may answer a
        request itself (a handshake step, a stream-json ``control_request``);
        the agent loop writes what this returns after each input line.
        """
        return ()


class Dialect(abc.ABC):
    """A named protocol; a factory of codecs.

    ``compat_args`` are added to the CLI's argv before ``--model`` (stream-json
    needs ``--output-format stream-json ...``).
    """

    name: str = ""
    compat_args: tuple[str, ...] = ()
    session_in_band: bool = False
    """True when the protocol opens, resumes and configures its session itself
    (ACP): no ``--model``/``--resume`` in argv, :meth:`HostCodec.start` instead.
    One of the request/response parts of the contract (see the module docstring)."""

    def launch_args(self, prefix_args: Sequence[str], *, partial_messages: bool = True) -> tuple[str, ...]:
        """The arguments this dialect adds to the CLI's argv (before ``--model``) for a launch.

        ``prefix_args`` are the user's own arguments (a dialect may leave out a
        flag they already set); ``partial_messages`` is the launch's wish for
        live deltas.  Default: :attr:`compat_args`.
        """
        return tuple(self.compat_args)

    @abc.abstractmethod
    def host_codec(self) -> HostCodec:
        """A fresh host-side codec."""

    @abc.abstractmethod
    def agent_codec(self) -> AgentCodec:
        """A fresh agent-side codec."""


make_text_delta: Callable[[str, int, Any], TextDelta] = _make_text_delta
"""``make_text_delta(text, index, raw)``: the same event as ``TextDelta(text=..., index=..., raw=...)``, cheaper.

For a dialect's hot path (one call per text-delta line): it fills the frozen
event's slots directly, about half the cost of the attrs constructor
(:func:`text_delta_slots` saves the call too).
"""
