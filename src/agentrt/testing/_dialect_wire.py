"""``check_dialect``'s wire: codecs driven through real JSON lines, failures named, the round trip.

Agent encode → JSON → host decode, and host encode → lines → agent decode,
each call guarded so that a misbehaving codec fails with a message naming the
dialect and the property instead of raising its own exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..dialect import AgentCodec, Dialect, HostCodec, InputError, Interrupt, Shutdown, Turn
from ..events import (
    Diagnostic,
    Event,
    ProcessExited,
    RawEvent,
    SessionStarted,
    Status,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)

__all__ = ["normalize_events"]


def _fail(name: str, message: str) -> AssertionError:
    return AssertionError(f"check_dialect({name!r}): {message}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def normalize_events(events: Iterable[Event]) -> list[Event]:
    """Events as the round-trip compares them.

    ``RawEvent`` (uninterpreted extras) is dropped; consecutive text (or
    thinking) deltas are joined into one with index 0, since a dialect may
    legitimately merge or split them; empty deltas are dropped.
    """
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, RawEvent):
            continue
        if isinstance(ev, (TextDelta, ThinkingDelta)):
            if not ev.text:
                continue
            last = out[-1] if out else None
            if last is not None and type(last) is type(ev):
                out[-1] = type(ev)(text=last.text + ev.text)
            else:
                out.append(type(ev)(text=ev.text))
            continue
        out.append(ev)
    return out


def _json_roundtrip(name: str, obj: Any) -> Any:
    import orjson

    try:
        return orjson.loads(orjson.dumps(obj))
    except (TypeError, orjson.JSONDecodeError) as exc:
        raise _fail(name, f"agent encode produced an object that is not JSON: {_short(obj)} ({exc})") from None


def _decode_all(name: str, codec: HostCodec, values: Iterable[Any], *, finish: bool = True) -> list[Event]:
    events: list[Event] = []
    for value in values:
        try:
            got = codec.decode(value)
        except Exception as exc:
            raise _fail(name, f"decode raised {type(exc).__name__}: {exc} on {_short(value)}") from exc
        if not isinstance(got, (list, tuple)):
            raise _fail(name, f"decode must return a list or tuple, got {type(got).__name__}")
        for ev in got:
            if not isinstance(ev, Event):
                raise _fail(name, f"decode produced {_short(ev)}, not an agentrt Event, on {_short(value)}")
        events.extend(got)
    if not finish:
        return events
    try:
        tail = codec.finish()
    except Exception as exc:
        raise _fail(name, f"finish raised {type(exc).__name__}: {exc}") from exc
    for ev in tail:
        if not isinstance(ev, Event):
            raise _fail(name, f"finish produced {_short(ev)}, not an agentrt Event")
    events.extend(tail)
    return events


#: The turn the round trip sends before a script and between its turns.
_ROUND_TRIP_TURN = Turn.text("go on")
#: Messages each side may owe the other before a turn reaches the agent (a handshake is a few).
_MAX_EXCHANGES = 16


def _started(host: HostCodec) -> HostCodec:
    # As the host path does before spawning: a new session, no model asked for.
    host.start(resume=None, model=None, cwd="/")
    return host


def _agent_encode(name: str, agent: AgentCodec, event: Event) -> list[Any]:
    try:
        objects = agent.encode(event)
    except Exception as exc:
        raise _fail(name, f"agent encode raised {type(exc).__name__}: {exc} on {_short(event)}") from exc
    return _agent_objects(name, "agent encode", objects)


def _agent_objects(name: str, what: str, objects: Any) -> list[Any]:
    out = []
    for obj in objects:
        if not isinstance(obj, Mapping):
            raise _fail(name, f"{what} must produce mappings, got {_short(obj)}")
        out.append(_json_roundtrip(name, obj))
    return out


def _host_reads(name: str, host: HostCodec, objects: list[Any]) -> list[Event]:
    return _decode_all(name, host, objects, finish=False)


def _deliver(name: str, host: HostCodec, agent: AgentCodec, turn: Turn) -> tuple[list[Any], list[Event]]:
    """Send ``turn`` from host to agent, each side's ``drain_output`` fed to the other until neither owes more.

    Returns what the agent's ``decode_input`` gave and the events the host
    decoded on the way (a handshake's).
    """
    pending = _turn_lines(name, host, turn)
    inputs: list[Any] = []
    events: list[Event] = []
    for _ in range(_MAX_EXCHANGES):
        inputs.extend(_decode_input(name, agent, obj) for obj in pending)
        try:
            owed = agent.drain_output()
        except Exception as exc:
            raise _fail(name, f"agent drain_output raised {type(exc).__name__}: {exc}") from exc
        owed = _agent_objects(name, "agent drain_output", owed)
        if not owed:
            return inputs, events
        events.extend(_host_reads(name, host, owed))
        try:
            data = host.drain_output()
        except Exception as exc:
            raise _fail(name, f"host drain_output raised {type(exc).__name__}: {exc}") from exc
        pending = [] if data is None else _split_lines(name, "drain_output", data)
        if not pending:
            return inputs, events
    raise _fail(name, f"host and agent codecs still owed each other messages after {_MAX_EXCHANGES} exchanges")


def _split_lines(name: str, what: str, data: Any) -> list[Any]:
    import orjson

    if not isinstance(data, bytes):
        raise _fail(name, f"{what} must return bytes, got {type(data).__name__}")
    if not data.endswith(b"\n"):
        raise _fail(name, f"{what} output must end with a newline: {_short(data)}")
    out = []
    for line in data[:-1].split(b"\n"):
        if not line.strip():
            raise _fail(name, f"{what} output has a blank line: {_short(data)}")
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            raise _fail(name, f"{what} output line is not JSON: {_short(line)}") from None
    return out


def _turn_lines(name: str, host: HostCodec, turn: Turn) -> list[Any]:
    try:
        data = host.encode_turn(turn)
    except Exception as exc:
        raise _fail(name, f"encode_turn raised {type(exc).__name__}: {exc} on {_short(turn)}") from exc
    return _split_lines(name, "encode_turn", data)


def _decode_input(name: str, agent: AgentCodec, value: Any) -> Any:
    try:
        got = agent.decode_input(value)
    except Exception as exc:
        raise _fail(name, f"decode_input raised {type(exc).__name__}: {exc} on {_short(value)}") from exc
    if got is not None and not isinstance(got, (Turn, Shutdown, Interrupt, InputError)):
        raise _fail(name, f"decode_input returned {_short(got)}, not Turn/Shutdown/Interrupt/InputError/None")
    if isinstance(got, InputError) and not (isinstance(got.code, str) and got.code):
        raise _fail(name, "an InputError needs a non-empty code")
    return got


def _roundtrip(name: str, instance: Dialect, script: Sequence[Event]) -> None:
    agent, host = instance.agent_codec(), _started(instance.host_codec())
    _, opening = _deliver(name, host, agent, _ROUND_TRIP_TURN)
    decoded: list[Event] = []
    for n, event in enumerate(script):
        decoded.extend(_host_reads(name, host, _agent_encode(name, agent, event)))
        if isinstance(event, (TurnCompleted, TurnFailed)) and n + 1 < len(script):
            decoded.extend(_deliver(name, host, agent, _ROUND_TRIP_TURN)[1])  # the next turn
    # A handshake that fails is as wrong as a diagnostic; a script's own failures are compared below.
    unexpected = [ev for ev in opening if isinstance(ev, (Diagnostic, TurnFailed))]
    unexpected += [ev for ev in decoded if isinstance(ev, Diagnostic)]
    if unexpected:
        raise _fail(name, f"round trip produced diagnostics: {_short(unexpected)}")
    want: list[Event] = list(script)
    if instance.session_in_band:
        opened = [ev for ev in (*opening, *decoded) if isinstance(ev, SessionStarted)]
        if len(opened) != 1:
            raise _fail(name, f"the handshake must open exactly one session, it gave {_short(opened)}")
        sid = opened[0].session_id
        want = [
            attrs.evolve(ev, session_id=sid) if isinstance(ev, TurnCompleted) and ev.session_id is None else ev
            for ev in want
            if not isinstance(ev, SessionStarted)
        ]
        decoded = [ev for ev in decoded if not isinstance(ev, SessionStarted)]
    else:
        decoded = [*opening, *decoded]
    want, got = normalize_events(want), normalize_events(decoded)
    if want != got:
        raise _fail(name, f"round trip changed the events:\n  sent    {_short(want)}\n  decoded {_short(got)}")
    # Events a dialect need not express must still encode without raising.
    for other in (
        Status(kind="status", label="x"),
        ProcessExited(returncode=0),
        RawEvent(name="x"),
        ToolResult(tool_use_id="t", content="c"),
        Diagnostic(code="unexpected_output_shape"),
    ):
        try:
            agent.encode(other)
        except Exception as exc:
            raise _fail(name, f"agent encode raised {type(exc).__name__} on {_short(other)}") from exc
