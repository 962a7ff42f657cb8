"""Raw taps: a sink that is a TapSource gets exactly the bytes the agent wrote and read, in order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import TextDelta, TurnCompleted
from agentrt.lowlevel import RawTap, TapInfo, TapSource

from .test_conversation import ENV, PLUGINS


class Tap:
    def __init__(self, log: list[tuple[str, bytes]]) -> None:
        self.log = log
        self.closed = 0

    def agent_output(self, chunk: bytes) -> None:
        self.log.append(("out", chunk))

    def agent_input(self, data: bytes) -> None:
        self.log.append(("in", data))

    def close(self) -> None:
        self.closed += 1


class TapSink:
    """A sink that records raw bytes: one tap per agent process."""

    name = "tap-sink"
    policy = "block"
    buffer_size = 16

    def __init__(self) -> None:
        self.infos: list[TapInfo] = []
        self.taps: list[Tap] = []

    async def handle(self, batch: Any) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def open_tap(self, info: TapInfo) -> RawTap | None:
        self.infos.append(info)
        tap = Tap([])
        self.taps.append(tap)
        return tap


def logging_agent(tmp_path: Path, *, turns_per_process: int) -> LaunchSpec:
    """An awp-jsonl agent that copies every byte it reads and writes to files, in pieces of odd sizes."""
    path = tmp_path / "logging-agent"
    stdin_log, stdout_log = tmp_path / "stdin.log", tmp_path / "stdout.log"
    path.write_text(
        f"#!{sys.executable} -S\n"
        "import json, sys\n"
        f"inp = open({str(stdin_log)!r}, 'ab', buffering=0)\n"
        f"out = open({str(stdout_log)!r}, 'ab', buffering=0)\n"
        "def w(b):\n"
        "    sys.stdout.buffer.write(b); sys.stdout.buffer.flush(); out.write(b)\n"
        "def emit(o):\n"
        "    data = (json.dumps(o, ensure_ascii=False) + '\\n').encode()\n"
        "    w(data[:7]); w(data[7:])  # a line in two writes: the tap sees chunks, not lines\n"
        "n = 0\n"
        "for raw in sys.stdin.buffer:\n"
        "    inp.write(raw)\n"
        "    if not raw.strip():\n"
        "        continue\n"
        "    msg = json.loads(raw)\n"
        "    n += 1\n"
        "    emit({'type': 'system', 'subtype': 'init', 'session_id': 's-1', 'model': 'm'})\n"
        "    text = 'reply ' + str(n) + ' é ✓'\n"
        "    emit({'type': 'content_block_delta', 'index': 0, 'delta': {'type': 'text_delta', 'text': text}})\n"
        "    emit({'type': 'result', 'subtype': 'success', 'is_error': False, 'session_id': 's-1', 'result': text})\n"
        f"    if n == {turns_per_process}:\n"
        "        break\n"
    )
    path.chmod(0o755)
    return LaunchSpec.from_env({}, executable=str(path), model="m-1")


async def test_a_tap_source_sink_gets_exactly_the_agents_bytes_in_order(tmp_path: Path) -> None:
    sink = TapSink()
    assert isinstance(sink, TapSource)
    launch = logging_agent(tmp_path, turns_per_process=10)
    async with open_conversation(launch, plugins=PLUGINS, sinks=[sink], parent_env=ENV) as conv:
        for prompt in ("first", "second ✓"):
            assert isinstance(await conv.ask(prompt), TurnCompleted)
        proc = conv.process
        assert proc is not None
    [info] = sink.infos
    assert info == TapInfo(conversation_id=conv.id, dialect="awp-jsonl", process=1, pid=proc.pid)
    [tap] = sink.taps
    assert tap.closed == 1
    written = b"".join(data for kind, data in tap.log if kind == "out")
    read = b"".join(data for kind, data in tap.log if kind == "in")
    assert written == (tmp_path / "stdout.log").read_bytes()
    assert read == (tmp_path / "stdin.log").read_bytes()
    # In order: each prompt is written before the output that answers it.
    kinds = [kind for kind, _ in tap.log]
    first_in, second_in, *shutdown = (n for n, kind in enumerate(kinds) if kind == "in")
    assert len(shutdown) <= 1  # the dialect's shutdown line, where it has one
    second_reply = next(n for n, (kind, data) in enumerate(tap.log) if kind == "out" and b"reply 2" in data)
    assert first_in < kinds.index("out") and second_in < second_reply
    assert b"second \xe2\x9c\x93" in tap.log[second_in][1]


async def test_every_process_gets_its_own_tap_and_a_respawn_is_numbered(tmp_path: Path) -> None:
    sink = TapSink()
    launch = logging_agent(tmp_path, turns_per_process=1)  # each process answers once and exits
    async with open_conversation(launch, plugins=PLUGINS, sinks=[sink], parent_env=ENV) as conv:
        for prompt in ("one", "two"):
            events = [ev async for ev in conv.send(prompt)]
            assert isinstance(events[-1], TurnCompleted)
            assert any(isinstance(ev, TextDelta) for ev in events)
            proc = conv.process
            assert proc is not None
            with trio.fail_after(30):  # a hang guard: the agent exits after its answer
                await proc.exited.wait()
    assert [info.process for info in sink.infos] == [1, 2]
    assert sink.infos[0].pid != sink.infos[1].pid
    assert [tap.closed for tap in sink.taps] == [1, 1]
    written = b"".join(data for tap in sink.taps for kind, data in tap.log if kind == "out")
    assert written == (tmp_path / "stdout.log").read_bytes()
    assert b"reply 1" in b"".join(data for kind, data in sink.taps[0].log if kind == "out")


class BrokenTap(Tap):
    def agent_output(self, chunk: bytes) -> None:
        raise OSError("disk full")


class BrokenTapSink(TapSink):
    name = "broken-tap-sink"

    def open_tap(self, info: TapInfo) -> RawTap | None:
        self.infos.append(info)
        tap = BrokenTap([])
        self.taps.append(tap)
        return tap


async def test_a_tap_that_raises_is_let_go_and_the_others_record_on(tmp_path: Path) -> None:
    broken, sink = BrokenTapSink(), TapSink()
    launch = logging_agent(tmp_path, turns_per_process=10)
    async with open_conversation(launch, plugins=PLUGINS, sinks=[broken, sink], parent_env=ENV) as conv:
        for prompt in ("first", "second"):
            assert isinstance(await conv.ask(prompt), TurnCompleted)
    [good] = sink.taps
    [bad] = broken.taps
    assert b"".join(data for kind, data in good.log if kind == "out") == (tmp_path / "stdout.log").read_bytes()
    # It saw the first prompt, raised at the first output and was let go: nothing after it, not even close.
    assert bad.log == [("in", good.log[0][1])]
    assert bad.closed == 0 and good.closed == 1
