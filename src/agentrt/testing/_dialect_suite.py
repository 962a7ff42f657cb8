"""``check_dialect``: the conformance suite every dialect (built-in or third-party) passes.

A plain function: it raises :class:`AssertionError` with a message naming the
dialect and the failing property, so it works from pytest, unittest or a
script.  It is deterministic (a seeded generator, no hypothesis needed) and
fast (well under a second for a codec of the built-in kind).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ..dialect import (
    AgentCodec,
    Dialect,
    HostCodec,
    Shutdown,
    TextBlock,
    Turn,
)
from ..errors import AgentrtError
from ..events import (
    Event,
    TurnCompleted,
)
from ._dialect_samples import DEFAULT_SCRIPTS, DEFAULT_TURNS, NASTY_VALUES
from ._dialect_wire import (
    _agent_encode,
    _decode_all,
    _decode_input,
    _deliver,
    _fail,
    _host_reads,
    _roundtrip,
    _short,
    _split_lines,
    _started,
    _turn_lines,
    normalize_events,
)

__all__ = ["check_dialect", "DEFAULT_SCRIPTS", "DEFAULT_TURNS", "NASTY_VALUES", "normalize_events"]


@attrs.frozen
class _AlienBlock:
    """A content block no dialect knows (stands for any future block type)."""

    payload: str = "x"


# -- the seeded fuzz ------------------------------------------------------------------

_WEIRD: tuple[Any, ...] = (None, True, 0, -7, 3.25, "", "zz", "\u0000é", [], [1, "a"], {}, {"type": "text"})


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.35:
        return rng.choice((*_WEIRD, rng.randint(-(2**40), 2**40), rng.random() * 1e6, chr(rng.randint(32, 0x2FFF))))
    if roll < 0.65:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = (
        "type",
        "subtype",
        "message",
        "content",
        "text",
        "event",
        "delta",
        "index",
        "id",
        "name",
        "input",
        "usage",
        "session_id",
        "is_error",
        "result",
        "request",
        "request_id",
    )
    obj = {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    if rng.random() < 0.6:
        obj["type"] = rng.choice(
            (
                "system",
                "assistant",
                "user",
                "result",
                "stream_event",
                "rate_limit_event",
                "control_request",
                "content_block_delta",
                "message_stop",
                "other",
            )
        )
    return obj


def _mutations(rng: random.Random, sample: Any, limit: int) -> list[Any]:
    """Copies of ``sample`` with one value (at any depth) replaced by a weird one."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if len(paths) > 400:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                paths.append((*path, k))
                walk(v, (*path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                paths.append((*path, i))
                walk(v, (*path, i))

    walk(sample, ())
    out: list[Any] = []
    for path in rng.sample(paths, min(limit, len(paths))):
        import copy

        clone = copy.deepcopy(sample)
        target = clone
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = rng.choice(_WEIRD)
        out.append(clone)
    return out


# -- the suite --------------------------------------------------------------------------


def check_dialect(
    dialect: Dialect | Callable[[], Dialect],
    *,
    samples: Iterable[Any] = (),
    scripts: Sequence[Sequence[Event]] | None = None,
    turns: Sequence[Turn] | None = None,
    fuzz: int = 300,
    seed: int = 0,
) -> None:
    """Check that ``dialect`` (or a factory of it) behaves as agentrt requires.

    ``samples`` are real output objects of the dialect's CLI (parsed JSON): they
    are decoded and, mutated, fuzz the decoder.  ``scripts`` are event
    sequences the dialect can express (default :data:`DEFAULT_SCRIPTS`; pass
    ``()`` for a decode-only dialect); ``turns`` the user turns it carries
    (default :data:`DEFAULT_TURNS`).  Checks, in order:

    1. ``name`` is a non-empty string, ``compat_args`` a tuple of strings;
    2. ``host_codec()`` / ``agent_codec()`` give fresh, independent codecs;
    3. ``decode`` never raises, returns a list or tuple of agentrt events, on
       the samples, :data:`NASTY_VALUES`, ``fuzz`` seeded random values and
       mutations of the samples (all through one stateful codec);
    4. ``encode_turn`` gives complete ``\\n``-terminated JSON lines, which the
       agent codec decodes back to the same turn (each side's
       ``drain_output`` fed to the other until the turn arrives, so a
       handshake counts; each turn is then ended by the agent codec's
       ``TurnCompleted``, so turns follow one another as in a conversation);
    5. an unsupported content block raises ``AgentrtError``
       (``unsupported_content_block``) and leaves the codec usable;
    6. ``encode_shutdown`` is ``None`` or one JSON line;
    7. ``decode_input`` never raises on nasty input and returns an agent input
       (``Turn``, ``Shutdown``, ``Interrupt``, ``InputError`` or ``None``);
    8. agent ``encode`` then host ``decode`` gives each script back (compared
       with :func:`normalize_events`), through real JSON serialisation; a
       turn is delivered as in clause 4 before the script and after each of
       its terminal events.  For a dialect that opens its session in band
       (:attr:`~agentrt.dialect.Dialect.session_in_band`) the session is the
       protocol's: the handshake must open exactly one, the script's
       ``SessionStarted`` events are not compared, and a ``TurnCompleted``
       without a session id stands for the handshake's;
    9. the host path's one decode method changes nothing but the cost: the
       samples, the fuzz values and the agent codec's output for the
       scripts, written as JSON lines and cut into chunks (of 4096 bytes, and
       of 251 so that chunks end inside lines), give through
       :meth:`~agentrt.dialect.HostCodec.decode_lines` (as the host path
       reads: each chunk's complete lines, the ones the codec does not take
       through ``general``) exactly the events (``repr`` and ``raw``) of
       ``decode`` on each plainly parsed line.
    """
    factory: Callable[[], Dialect] = dialect if not isinstance(dialect, Dialect) else (lambda: dialect)
    instance = factory()
    if not isinstance(instance, Dialect):
        raise AssertionError(f"check_dialect: factory returned {type(instance).__name__}, not a Dialect")
    name = instance.name
    if not isinstance(name, str) or not name:
        raise _fail(str(name), "Dialect.name must be a non-empty string")
    if not isinstance(instance.compat_args, tuple) or not all(isinstance(a, str) for a in instance.compat_args):
        raise _fail(name, "compat_args must be a tuple of strings")
    samples = list(samples)
    scripts = DEFAULT_SCRIPTS if scripts is None else tuple(tuple(s) for s in scripts)
    turns = DEFAULT_TURNS if turns is None else tuple(turns)
    rng = random.Random(seed)

    # 2. fresh and independent codecs
    h1, h2 = instance.host_codec(), instance.host_codec()
    a1, a2 = instance.agent_codec(), instance.agent_codec()
    if not isinstance(h1, HostCodec) or not isinstance(a1, AgentCodec):
        raise _fail(name, "host_codec()/agent_codec() must return HostCodec/AgentCodec instances")
    if h1 is h2 or a1 is a2:
        raise _fail(name, "host_codec()/agent_codec() must return a fresh codec per call")
    first = _decode_all(name, h1, samples)
    _decode_all(name, h1, NASTY_VALUES)  # dirty h1's state: h2 must not notice
    second = _decode_all(name, h2, samples)
    if first != second:
        raise _fail(name, "two fresh host codecs decoded the same samples differently (shared state?)")

    # 3. decode never raises
    fuzz_values: list[Any] = [_random_json(rng) for _ in range(fuzz)]
    for sample in samples:
        fuzz_values.extend(_mutations(rng, sample, max(1, fuzz // max(1, len(samples)))))
    stateful = instance.host_codec()
    _decode_all(name, stateful, [*samples, *NASTY_VALUES, *fuzz_values, *samples])
    for value in NASTY_VALUES:  # and each alone on a fresh codec
        _decode_all(name, instance.host_codec(), [value])

    # 4. encode_turn: complete lines, decoded back (through a handshake if the protocol has one)
    host, agent = _started(instance.host_codec()), instance.agent_codec()
    for turn in turns:
        decoded, _ = _deliver(name, host, agent, turn)
        got = [d for d in decoded if isinstance(d, Turn)]
        if got != [turn]:
            raise _fail(name, f"encode_turn then decode_input gave {_short(decoded)} for {_short(turn)}")
        _host_reads(name, host, _agent_encode(name, agent, TurnCompleted()))

    # 5. unsupported blocks
    alien: Any = _AlienBlock()
    host = _started(instance.host_codec())
    for bad in (Turn(content=(alien,)), Turn(content=(TextBlock(text="fine"), alien))):
        try:
            produced = host.encode_turn(bad)
        except AgentrtError as exc:
            if exc.code != "unsupported_content_block":
                raise _fail(
                    name, f"unsupported block raised code {exc.code!r}, expected 'unsupported_content_block'"
                ) from None
        except Exception as exc:
            raise _fail(name, f"unsupported block raised {type(exc).__name__}, not AgentrtError") from exc
        else:
            raise _fail(name, f"unsupported block was encoded as {_short(produced)}; it must raise")
    if turns and _turn_lines(name, host, turns[0]) != _turn_lines(name, _started(instance.host_codec()), turns[0]):
        raise _fail(name, "after refusing a turn the host codec encodes differently from a fresh one")

    # 6. shutdown
    shutdown = instance.host_codec().encode_shutdown()
    if shutdown is not None:
        lines = _split_lines(name, "encode_shutdown", shutdown)
        if len(lines) != 1:
            raise _fail(name, f"encode_shutdown must be one line, got {len(lines)}")
        if not isinstance(_decode_input(name, instance.agent_codec(), lines[0]), Shutdown):
            raise _fail(name, "the agent codec does not read encode_shutdown() as Shutdown")

    # 7. decode_input never raises
    agent = instance.agent_codec()
    for value in (*NASTY_VALUES, *fuzz_values[:100]):
        _decode_input(name, agent, value)

    # 8. round trip of expressible events
    for script in scripts:
        _roundtrip(name, instance, script)

    # 9. decode_lines (a dialect's fast path, if it has one) changes nothing but the cost
    _check_fast_path(name, instance, [*samples, *fuzz_values, *samples], scripts)


def _check_fast_path(name: str, instance: Dialect, values: list[Any], scripts: Sequence[Sequence[Event]]) -> None:
    import orjson

    from .._framing import JsonlReader, Malformed

    lines: list[bytes] = []
    for value in values:
        try:
            lines.append(orjson.dumps(value))
        except TypeError:
            continue  # not JSON-serialisable: no CLI could have written it
    for script in scripts:
        agent = instance.agent_codec()
        for event in script:
            lines.extend(orjson.dumps(obj) for obj in agent.encode(event))
    blob = b"\n".join(lines) + b"\n"

    def reference() -> list[tuple[str, Any]]:
        # The general path: every line parsed plainly, then decode per object.
        codec = instance.host_codec()
        reader = JsonlReader()
        events: list[Event] = []
        for start in range(0, len(blob), 4096):
            objs = [obj for obj in reader.feed(blob[start : start + 4096]) if type(obj) is not Malformed]
            events.extend(_decode_all(name, codec, objs, finish=False))
        events.extend(codec.finish())
        return [(repr(ev), ev.raw) for ev in events]

    def read_lines(size: int) -> list[tuple[str, Any]]:
        # The host path, as the pump takes it (the default decode_lines too).
        from .._line_parse import decode_objects

        codec = instance.host_codec()
        reader = JsonlReader()
        events: list[Event] = []

        def general(line: bytes) -> list[Event]:
            return decode_objects(codec, [obj for obj in reader.parse(line) if type(obj) is not Malformed])

        for start in range(0, len(blob), size):
            lines = reader.feed_lines(blob[start : start + size])
            try:
                got = codec.decode_lines(lines, general) if lines else []
            except Exception as exc:
                raise _fail(name, f"decode_lines raised {type(exc).__name__}: {exc}") from exc
            events.extend(got)
        events.extend(codec.finish())
        return [(repr(ev), ev.raw) for ev in events]

    want = reference()
    for size in (4096, 251):
        fast = read_lines(size)
        if fast != want:
            at = next((i for i, (a, b) in enumerate(zip(fast, want)) if a != b), min(len(fast), len(want)))
            got = fast[at] if at < len(fast) else "nothing"
            expected = want[at] if at < len(want) else "nothing"
            raise _fail(name, f"decode_lines changed event #{at}: {_short(got)} instead of {_short(expected)} (decode)")
