"""Event dispatch by class, in process: ``type(ev) is X`` chains against ``match`` and a dict of handlers.

``python -m bench dispatch``.  A sink or a codec that projects events picks
what to do by the event's class once per event, on the host's hot path.  Five
ways of writing the same eight-way dispatch (the web sink's: text deltas,
turn starts, tool uses and results, statuses, terminals, sessions,
diagnostics) are timed over the same events:

* ``type_is_local``: ``cls = type(ev)`` once, then ``cls is X`` per branch
  (the form a type checker cannot narrow ``ev`` by: it needed ``type: ignore``);
* ``type_is``: ``type(ev) is X`` per branch (narrowed by mypy, one call per branch tried);
* ``match``: ``match ev: case X():`` (class patterns: an ``isinstance`` per case tried);
* ``handlers``: a dict from class to a function taking the narrowed event;
* ``text_then_match``: ``type(ev) is TextDelta`` first (narrowed), ``match`` for the rest.

Two mixes: ``text`` is the stream-json corpus as the host decodes it (almost
every event a text delta, the first branch), ``late`` is the same events
without their text deltas (every event past the first branch).  CPU seconds
of one pass over each mix, interleaved rounds, medians with ranges, ratios to
``type_is_local``; the load is printed beside every run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from ._corpus import corpus_module
from ._rounds import Figures, interleave, load_text, print_summary, summarize


def _events(n_lines: int) -> list[Any]:
    from agentrt import Plugins
    from agentrt.lowlevel import JsonlReader

    codec = Plugins(autoload=True).dialect("stream-json").host_codec()
    blob = b"".join(line for _, line in corpus_module().corpus_lines(n_lines))
    out: list[Any] = []
    for obj in JsonlReader().feed(blob):
        out.extend(codec.decode(obj))
    return out


def _dispatchers() -> dict[str, Callable[[list[Any]], int]]:
    from agentrt.events import (
        Diagnostic,
        ProcessExited,
        SessionStarted,
        Status,
        TextDelta,
        ToolResult,
        ToolUse,
        TurnCompleted,
        TurnFailed,
        TurnStarted,
    )

    def type_is_local(events: list[Any]) -> int:
        n = 0
        for ev in events:
            cls = type(ev)
            if cls is TextDelta:
                n += len(ev.text)
            elif cls is TurnStarted:
                n += ev.turn
            elif cls is ToolUse:
                n += len(ev.name)
            elif cls is ToolResult:
                n += ev.is_error
            elif cls is Status:
                n += len(ev.kind)
            elif cls is TurnCompleted or cls is TurnFailed:
                n += 1
            elif cls is SessionStarted:
                n += ev.model is None
            elif cls is Diagnostic:
                n += len(ev.code)
            elif cls is ProcessExited:
                n += ev.requested
        return n

    def type_is(events: list[Any]) -> int:
        n = 0
        for ev in events:
            if type(ev) is TextDelta:
                n += len(ev.text)
            elif type(ev) is TurnStarted:
                n += ev.turn
            elif type(ev) is ToolUse:
                n += len(ev.name)
            elif type(ev) is ToolResult:
                n += ev.is_error
            elif type(ev) is Status:
                n += len(ev.kind)
            elif type(ev) is TurnCompleted or type(ev) is TurnFailed:
                n += 1
            elif type(ev) is SessionStarted:
                n += ev.model is None
            elif type(ev) is Diagnostic:
                n += len(ev.code)
            elif type(ev) is ProcessExited:
                n += ev.requested
        return n

    def match(events: list[Any]) -> int:
        n = 0
        for ev in events:
            match ev:
                case TextDelta():
                    n += len(ev.text)
                case TurnStarted():
                    n += ev.turn
                case ToolUse():
                    n += len(ev.name)
                case ToolResult():
                    n += ev.is_error
                case Status():
                    n += len(ev.kind)
                case TurnCompleted() | TurnFailed():
                    n += 1
                case SessionStarted():
                    n += ev.model is None
                case Diagnostic():
                    n += len(ev.code)
                case ProcessExited():
                    n += ev.requested
        return n

    def text_then_match(events: list[Any]) -> int:
        # The hot class first by identity (narrowed by mypy), the rest by match.
        n = 0
        for ev in events:
            if type(ev) is TextDelta:
                n += len(ev.text)
                continue
            match ev:
                case TurnStarted():
                    n += ev.turn
                case ToolUse():
                    n += len(ev.name)
                case ToolResult():
                    n += ev.is_error
                case Status():
                    n += len(ev.kind)
                case TurnCompleted() | TurnFailed():
                    n += 1
                case SessionStarted():
                    n += ev.model is None
                case Diagnostic():
                    n += len(ev.code)
                case ProcessExited():
                    n += ev.requested
        return n

    table: dict[type, Callable[[Any], int]] = {
        TextDelta: lambda ev: len(ev.text),
        TurnStarted: lambda ev: ev.turn,
        ToolUse: lambda ev: len(ev.name),
        ToolResult: lambda ev: ev.is_error,
        Status: lambda ev: len(ev.kind),
        TurnCompleted: lambda ev: 1,
        TurnFailed: lambda ev: 1,
        SessionStarted: lambda ev: ev.model is None,
        Diagnostic: lambda ev: len(ev.code),
        ProcessExited: lambda ev: ev.requested,
    }

    def handlers(events: list[Any]) -> int:
        n = 0
        get = table.get
        for ev in events:
            handler = get(type(ev))
            if handler is not None:
                n += handler(ev)
        return n

    return {
        "type_is_local": type_is_local, "type_is": type_is, "match": match, "handlers": handlers,
        "text_then_match": text_then_match,
    }  # fmt: skip


def main(rounds: int = 7, n_lines: int = 100_000) -> dict[str, Any]:
    """Interleave the dispatchers over both mixes; print every run and the summaries."""
    from agentrt.events import TextDelta

    rounds = int(os.environ.get("AGENTRT_BENCH_ROUNDS", rounds))
    n_lines = int(os.environ.get("AGENTRT_BENCH_LINES", n_lines))
    text = _events(n_lines)
    late = [ev for ev in text if type(ev) is not TextDelta] * 20
    dispatchers = _dispatchers()
    results: dict[str, Any] = {}
    for mix, events in (("text", text), ("late", late)):
        want = {name: fn(events) for name, fn in dispatchers.items()}
        assert len(set(want.values())) == 1, want  # the same work on every path

        def timed(fn: Callable[[list[Any]], int], events: list[Any] = events) -> Figures:
            start = time.process_time()
            fn(events)
            return {"cpu_ms": (time.process_time() - start) * 1e3}

        deltas = sum(type(ev) is TextDelta for ev in events)
        print(f"dispatch, mix {mix}: {len(events)} events ({deltas} text deltas), {rounds} rounds [{load_text()}]")
        contenders = {name: (lambda fn=fn: timed(fn)) for name, fn in dispatchers.items()}
        runs = interleave(contenders, rounds, label=f"{mix} ")
        summary = summarize(runs, "type_is_local", ("cpu_ms",))
        print_summary(f"dispatch by class, mix {mix} (medians of {rounds} interleaved rounds [range]; "
                      "ratios to type_is_local)", summary)
        results[mix] = summary
    return results


if __name__ == "__main__":
    main()
