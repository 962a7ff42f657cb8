"""A transcript replayed through its dialect's decoder gives the events the conversation saw, event for event.

The live side here is the runtime's own host loop over a real child process
(``pump_events`` reading its stdout, ``TurnRules`` ruling on every chunk,
batches in sequence to the sink), with the sink's raw tap on every chunk
read: each capture of a real peer in the repository, as the peer wrote it.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from agentrt import get_plugins
from agentrt.events import Event, EventBatch, TurnCompleted, TurnFailed, TurnStarted
from agentrt.lowlevel import ProcessSpec, TapInfo, TurnRules, open_process, pump_events
from agentrt_sqlite._encode import encode_event
from agentrt_sqlite._replay import replay
from agentrt_sqlite._sink import SqliteSink
from agentrt_sqlite._transcript import MAGIC, read_header, read_records

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / "plugins"  # other dialects' captures: an exception in tests/core/test_plugin_tests_stay_home.py
CLAUDE = sorted((PLUGINS / "agentrt-stream-json" / "tests" / "captures" / "claude-code").glob("*.stdout.jsonl"))
ACP = sorted((PLUGINS / "agentrt-acp" / "tests" / "captures" / "acp").glob("*.stdout.jsonl"))
CAPTURES = [("stream-json", p) for p in CLAUDE] + [("acp", p) for p in ACP]
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def _live(sink: SqliteSink, dialect: str, capture: Path, conversation: str) -> list[Event]:
    """Run the capture through the host loop into ``sink``; the events the conversation saw."""
    codec = get_plugins().dialect(dialect).host_codec()
    rules = TurnRules()
    seen: list[Event] = []
    seq = 0
    turns = 0

    async def dispatch(events: Sequence[Event]) -> None:
        nonlocal seq
        out, _, _ = rules.apply(events)
        if out:
            await sink.handle(EventBatch(source=conversation, first_seq=seq, mono=trio.current_time(),
                                         wall=1_700_000_000.0 + seq, events=tuple(out)))
            seq += len(out)
            seen.extend(out)

    async def begin() -> None:
        nonlocal turns
        turns += 1
        rules.begin_turn(turns)
        await dispatch([TurnStarted(turn=turns, prompt=f"prompt {turns}")])
        rules.input_sent()
        tap.agent_input(b'{"prompt": %d}\n' % turns)

    async def on_events(events: list[Event]) -> None:
        # A chunk that ends a turn: the next turn starts right after its terminal event.
        start = 0
        for i, ev in enumerate(events):
            if isinstance(ev, (TurnCompleted, TurnFailed)) and rules.turn is not None and rules.turn.live:
                await dispatch(events[start : i + 1])
                start = i + 1
                await begin()
        await dispatch(events[start:])

    async def on_oversize(before: list[Event]) -> bool:
        await on_events(before)
        return True

    spec = ProcessSpec(argv=(sys.executable, "-S", "-c",
                             "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", str(capture)),
                       env=ENV)
    async with open_process(spec) as proc:
        tap = sink.open_tap(TapInfo(conversation_id=conversation, dialect=dialect, process=1, pid=proc.pid))
        assert tap is not None
        proc.tap = tap  # every chunk read goes to the transcript before it is decoded
        await begin()
        await pump_events(proc, codec, on_events, on_oversize=on_oversize)
        status = await proc.wait()
        await dispatch(rules.at_exit(status))
        tap.close()
    return seen


def _points_at(fd: str, path: Path) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == str(path)
    except OSError:
        return False


def _forms(events: Sequence[Event]) -> list[Any]:
    return [orjson.loads(encode_event(e)) for e in events]


@pytest.mark.parametrize(("dialect", "capture"), CAPTURES, ids=[p.name.split(".")[0] for _, p in CAPTURES])
async def test_the_replay_of_a_capture_equals_the_live_events(tmp_path: Path, dialect: str, capture: Path) -> None:
    sink = SqliteSink(tmp_path / "agentrt.db")
    with trio.fail_after(60):
        live = await _live(sink, dialect, capture, "conv-1")
        await sink.aclose()
    path = tmp_path / "transcripts" / "conv-1.atr"
    replayed = list(replay(path, "conv-1"))
    assert [env["seq"] for env in replayed] == list(range(len(live)))
    assert [env["event"] for env in replayed] == _forms(live)
    # The agent's bytes are in the transcript unparsed, in order.
    output = b"".join(p for kind, _, _, p in read_records(path, kinds=b"O"))
    assert output == capture.read_bytes()
    assert len(live) > 3


async def test_the_transcript_is_private_and_says_what_wrote_it(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "agentrt.db")
    path = tmp_path / "transcripts" / "conv-2.atr"
    with trio.fail_after(60):
        await _live(sink, "stream-json", CLAUDE[0], "conv-2")
        # The process is done with: the sink holds no descriptor of its transcript while it stays open.
        assert not [fd for fd in os.listdir("/proc/self/fd") if _points_at(fd, path)]
        await sink.aclose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_bytes().startswith(MAGIC)
    header = read_header(path)
    assert header["dialect"] == "stream-json" and header["conversation"] == "conv-2"
    assert header["agentrt"] and isinstance(header["wall"], float)
    kinds = [kind for kind, _, _, _ in read_records(path)]
    assert kinds[0] == b"P" and kinds[-1] == b"C" and b"I" in kinds and b"E" in kinds


class _Collector:
    """A sink that keeps every event the conversation saw, in order."""

    name = "collector"
    policy = "block"
    buffer_size = 64

    def __init__(self) -> None:
        self.events: list[tuple[str, int, Event]] = []

    async def handle(self, batch: EventBatch) -> None:
        self.events.extend((batch.source, batch.first_seq + i, ev) for i, ev in enumerate(batch.events))

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("capture", CLAUDE, ids=[p.name.split(".")[0] for p in CLAUDE])
async def test_a_real_conversation_replays_to_what_it_saw(tmp_path: Path, capture: Path) -> None:
    """End to end: ``open_conversation`` over a tape of a real Claude Code session, recorded by its raw tap."""
    from agentrt import LaunchSpec, open_conversation
    from agentrt.testing import write_tape_agent
    from agentrt_sqlite.api import read_events

    turns = sum(1 for line in capture.read_bytes().splitlines() if b'"type":"result"' in line.replace(b" ", b""))
    agent = write_tape_agent(tmp_path, capture)
    db = tmp_path / "agentrt.db"
    recorder, collector = SqliteSink(db), _Collector()
    with trio.fail_after(120):
        async with open_conversation(LaunchSpec(executable=agent, protocol="stream-json"), parent_env=ENV,
                                     sinks=[recorder, collector], first_output_timeout=None) as conv:
            for n in range(max(turns, 1)):
                await conv.ask(f"prompt {n + 1}")
    live = collector.events
    replayed = await trio.to_thread.run_sync(read_events, db, conv.id)
    assert [(e["source"], e["seq"]) for e in replayed] == [(s, q) for s, q, _ in live]
    assert [e["event"] for e in replayed] == _forms([ev for _, _, ev in live])
    # Tapped: the transcript holds the agent's bytes and what agentrt wrote; E records only the rest.
    path = tmp_path / "transcripts" / f"{conv.id}.atr"
    kinds = [kind for kind, _, _, _ in read_records(path)]
    assert kinds.count(b"I") >= turns and b"O" in kinds
    marked = sum(len(orjson.loads(p)["events"]) for _, _, _, p in read_records(path, kinds=b"E"))
    assert marked < len(live) or not any(type(ev).__name__ == "TextDelta" for _, _, ev in live)


async def test_a_dialect_no_longer_installed_replays_what_agentrt_made_and_says_so(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "agentrt.db")
    with trio.fail_after(60):
        live = await _live(sink, "stream-json", CLAUDE[0], "conv-3")
        await sink.aclose()
    replayed = list(replay(tmp_path / "transcripts" / "conv-3.atr", "conv-3", codec_for=lambda name: None))
    *kept, last = replayed
    assert last["event"]["code"] == "invalid_cli_protocol"
    assert "'stream-json' is not installed" in last["event"]["detail"]
    forms = _forms(live)
    assert kept and [e["event"] for e in kept] == [forms[e["seq"]] for e in kept]
    assert {e["event"]["type"] for e in kept} >= {"turn_started", "turn_completed"}
    assert "text_delta" not in {e["event"]["type"] for e in kept}


async def _conversation(
    tmp_path: Path, launch: Any, prompts: Sequence[str], resume: str | None = None
) -> tuple[list[Any], list[Any], Path]:
    from agentrt import open_conversation
    from agentrt_sqlite.api import read_events

    db = tmp_path / "agentrt.db"
    recorder, collector = SqliteSink(db), _Collector()
    with trio.fail_after(120):
        async with open_conversation(launch, parent_env=ENV, sinks=[recorder, collector], resume=resume,
                                     first_output_timeout=None) as conv:
            for prompt in prompts:
                await conv.ask(prompt)
    replayed = await trio.to_thread.run_sync(read_events, db, conv.id)
    return replayed, collector.events, tmp_path / "transcripts" / f"{conv.id}.atr"


async def test_an_awp_jsonl_conversation_replays_to_what_it_saw(tmp_path: Path) -> None:
    from agentrt import LaunchSpec
    from agentrt.testing import write_fixture_agent

    launch = LaunchSpec(executable=write_fixture_agent(tmp_path), protocol="awp-jsonl")
    replayed, live, path = await _conversation(tmp_path, launch, ["hello", "again"])
    assert [(e["source"], e["seq"]) for e in replayed] == [(s, q) for s, q, _ in live]
    assert [e["event"] for e in replayed] == _forms([ev for _, _, ev in live])
    kinds = [kind for kind, _, _, _ in read_records(path)]
    assert kinds.count(b"P") == 1 and kinds.count(b"I") >= 2 and b"O" in kinds
    assert orjson.loads(next(p for k, _, _, p in read_records(path) if k == b"P"))["replay"] == "decode"


async def test_an_acp_conversation_with_a_loaded_session_replays_to_what_it_saw(tmp_path: Path) -> None:
    """ACP (a real Python-SDK agent): its raw bytes are kept and every event is an E record, so a
    resumed session's replayed history (shown live as replay events, not as new text) stays so."""
    from agentrt import LaunchSpec

    fixture = PLUGINS / "agentrt-acp" / "tests" / "fixtures" / "acp_agent.py"
    path = tmp_path / "acp-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(fixture)!r}, run_name='__main__')\n")
    path.chmod(0o700)
    launch = LaunchSpec(executable=str(path), protocol="acp")
    replayed, live, transcript = await _conversation(tmp_path, launch, ["hello", "extras"])
    assert [e["event"] for e in replayed] == _forms([ev for _, _, ev in live])
    assert any(type(ev).__name__ == "TextDelta" for _, _, ev in live)
    session = next(ev.session_id for _, _, ev in live if type(ev).__name__ == "SessionStarted")
    # Resumed: the agent replays the history first (live: replay/... raw events, no text deltas for it).
    again, live_again, _ = await _conversation(tmp_path, launch, ["more"], resume=session)
    assert [e["event"] for e in again] == _forms([ev for _, _, ev in live_again])
    assert any(e["event"]["type"] == "raw" and e["event"]["name"].startswith("replay/") for e in again)
    kinds = [kind for kind, _, _, _ in read_records(transcript)]
    assert b"O" in kinds and b"I" in kinds  # the raw bytes both ways, all the same
    assert orjson.loads(next(p for k, _, _, p in read_records(transcript) if k == b"P"))["replay"] == "events"
