import io
import os
import subprocess
import sys
from pathlib import Path

from agentrt.events import (
    Diagnostic,
    EventBatch,
    ProcessExited,
    Status,
    TextDelta,
    ToolResult,
    ToolUse,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)
from agentrt.testing import check_sink
from agentrt_tui._sink import TuiSink, make_sink

TURN = [
    [TurnStarted(turn=1, prompt="hi")],
    [TextDelta(text="# Title\n\nSome **bold** "), TextDelta(text="text.\x1b[2J\x07\r")],
    [ToolUse(id="t", name="Bash", input={"command": "git status --short\nrm -rf /"})],
    [Status(kind="rate_limit", label="retrying in 3 s")],
    [ToolResult(tool_use_id="t", content="ok")],
    [Diagnostic(code="malformed_output", detail="1 line was not JSON")],
    [TurnCompleted(usage=Usage(input_tokens=12, output_tokens=2))],
]


async def _feed(sink: TuiSink, groups: list[list], mono0: float = 100.0) -> None:
    seq = 0
    for i, events in enumerate(groups):
        await sink.handle(EventBatch(source="c", first_seq=seq, mono=mono0 + i * 0.25, wall=0.0,
                                     events=tuple(events)))
        seq += len(events)
    await sink.aclose()


async def test_plain_output_to_a_file_has_no_escape_codes(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with path.open("w") as f:
        sink = TuiSink(f)
        assert sink.terminal is False  # a file is not a terminal
        await _feed(sink, TURN)
    out = path.read_text()
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert out == (
        "# Title\n\nSome **bold** text.\n"
        "● Bash: git status --short\n"
        "  │ rm -rf /\n"
        "[rate limited: retrying in 3 s]\n"
        "  ⎿ ok\n"
        "· malformed_output: 1 line was not JSON\n"
        "(12 in · 2 out · 1.5 s)\n"
    )


async def test_failures_in_plain_words_with_their_code() -> None:
    buf = io.StringIO()
    await _feed(TuiSink(buf), [[TurnStarted(turn=1, prompt="x")], [TextDelta(text="partial")],
                               [TurnFailed(code="turn_cancelled", message="")],
                               [ProcessExited(returncode=3, requested=False)]])
    assert buf.getvalue() == (
        "partial\nerror: the turn was cancelled [turn_cancelled]\n(0.5 s)\n"
        "error: the agent exited unexpectedly (code 3)\n"
    )


async def test_rich_view_streams_then_renders_markdown() -> None:
    buf = io.StringIO()
    sink = TuiSink(buf, terminal=True, width=80)
    await _feed(sink, TURN)
    out = buf.getvalue()
    assert "\x1b[" in out  # a terminal gets styling
    assert "\x1b[2J" not in out and "\x07" not in out  # but never the agent's own escapes
    final = out.rsplit("Some", 1)[1]
    assert "**" not in final.split("text.")[0]  # the final render is Markdown, not raw
    assert "Title" in out and "[2J" not in out
    assert "12 in · 2 out · 1.5 s" in out
    # A tool call has lines of its own: the whole command (every line), then its result.
    assert "Bash\x1b[0m: git status --short\n  │ rm -rf /\n" in out and "  ⎿ ok" in out


async def test_tui_conforms() -> None:
    await check_sink(lambda: TuiSink(io.StringIO()))
    await check_sink(lambda: TuiSink(io.StringIO(), terminal=True, width=100))


async def test_rich_status_line_follows_tools_and_rate_limits() -> None:
    sink = TuiSink(io.StringIO(), terminal=True, width=80)
    seen = []
    for i, events in enumerate(TURN[:5]):
        await sink.handle(EventBatch(source="c", first_seq=i, mono=float(i), wall=0.0, events=tuple(events)))
        seen.append(sink.view.status)
    await sink.aclose()
    assert seen == ["", "", "Running: git status --short", "rate limited: retrying in 3 s", ""]


def test_status_wording() -> None:
    from agentrt.events import Status
    from agentrt_tui._view import _status_text

    assert _status_text(Status(kind="rate_limit", label="rate_limited")) == "rate limited"
    assert _status_text(Status(kind="api_retry", label="API error 500, retrying")) == "API error 500, retrying"
    assert _status_text(Status(kind="status", label="requesting")) == "requesting"
    assert _status_text(Status(kind="permission_denied", label="")) == "permission denied"
    assert _status_text(Status(kind="x", label="y" * 500)).endswith("…")


def test_escape_sequences_are_removed_whole() -> None:
    from agentrt_tui._view import clean

    assert clean("a\x1b[31mred\x1b[0m b\x1b]0;title\x07c\x1b]8;;http://x\x1b\\d\x9b2Je\x00f\tg\nh") == (
        "ared bcd2Jef\tg\nh"
    )


def test_factory_and_policy() -> None:
    sink = make_sink({"file": io.StringIO()})
    assert sink.policy == "coalesce" and sink.buffer_size >= 1 and not sink.terminal


def test_importing_the_plugin_does_not_import_rich() -> None:
    code = "import sys, agentrt_tui; assert 'rich' not in sys.modules, 'rich imported'"
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=30)


async def test_plain_output_to_a_pipe_is_written_in_the_trio_thread_in_order() -> None:
    import trio

    r, w = os.pipe()
    reader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
                              stdin=r, stdout=subprocess.PIPE)
    os.close(r)
    pieces = [f"<{i:06d}>" for i in range(20_000)]
    with os.fdopen(w, "w", encoding="utf-8") as f:
        sink = TuiSink(f)
        assert sink._writer is not None and sink._writer.mode == "nowait"  # no thread hop per batch
        f.write("before\n")  # what the caller printed through the file itself comes first
        groups: list[list] = [[TurnStarted(turn=1, prompt="hi")]]
        groups += [[TextDelta(text=p) for p in pieces[i : i + 50]] for i in range(0, len(pieces), 50)]
        groups.append([TurnCompleted(usage=Usage(input_tokens=1, output_tokens=2))])
        with trio.fail_after(60):
            await _feed(sink, groups)
    out, _ = await trio.to_thread.run_sync(reader.communicate)
    assert out.decode() == "before\n" + "".join(pieces) + "\n(1 in · 2 out · 100.2 s)\n"


async def test_plain_output_stops_cleanly_when_the_pipe_reader_goes_away() -> None:
    import trio

    r, w = os.pipe()
    os.close(r)
    with os.fdopen(w, "w", encoding="utf-8") as f:
        sink = TuiSink(f)
        with trio.fail_after(30):
            await sink.handle(EventBatch(source="c", first_seq=0, mono=0.0, wall=0.0,
                                         events=(TurnStarted(turn=1, prompt="x"), TextDelta(text="lost"))))
            assert sink.output_closed
            await sink.handle(EventBatch(source="c", first_seq=2, mono=0.0, wall=0.0,
                                         events=(TurnCompleted(),)))  # dropped, not an error
            await sink.wait_turns(1)  # returns: nothing more will be drawn
            await sink.aclose()


async def test_text_blocks_and_tool_calls_get_lines_of_their_own() -> None:
    buf = io.StringIO()
    await _feed(TuiSink(buf), [
        [TurnStarted(turn=1, prompt="x")],
        [TextDelta(text="I will run a command.", index=0),
         ToolUse(id="t", name="Bash", input={"command": "echo hi\x1b[2J"})],
        [ToolResult(tool_use_id="t", content=[{"type": "text", "text": "hi\nthere\n"}])],
        [TextDelta(text="The tool said: hi", index=0), TextDelta(text="Second block.", index=1)],
        [ToolUse(id="u", name="Read", input={"file_path": "/tmp/a.py"}),
         ToolResult(tool_use_id="u", content="no such file", is_error=True)],
        [TurnCompleted()],
    ])
    assert buf.getvalue() == (
        "I will run a command.\n"
        "● Bash: echo hi\\x1b[2J\n"  # the whole command, its escape shown, never sent to the terminal
        "  ⎿ hi (+1 lines)\n"
        "The tool said: hi\n"
        "Second block.\n"
        "● Read: Reading a.py\n"
        "  ⎿ failed: no such file\n"
        "(1.2 s)\n"
    )


async def test_paused_draws_nothing_until_resumed() -> None:
    import trio
    import trio.testing

    buf = io.StringIO()
    sink = TuiSink(buf, terminal=True, width=80)
    await sink.handle(EventBatch(source="c", first_seq=0, mono=0.0, wall=0.0,
                                 events=(TurnStarted(turn=1, prompt="x"), TextDelta(text="before"))))
    with trio.fail_after(30):  # hang guard only
        async with trio.open_nursery() as nursery, sink.paused():
            assert sink.view._live is None  # type: ignore[attr-defined]  # the live region is stopped
            held = buf.getvalue()
            assert "before" in held  # what it showed stays on the screen
            nursery.start_soon(sink.handle, EventBatch(source="c", first_seq=2, mono=1.0, wall=0.0,
                                                       events=(TextDelta(text="after"),)))
            await trio.testing.wait_all_tasks_blocked()
            assert buf.getvalue() == held  # the batch waits: nothing repaints over a question
    await sink.handle(EventBatch(source="c", first_seq=3, mono=2.0, wall=0.0, events=(TurnCompleted(),)))
    await sink.aclose()
    assert "after" in buf.getvalue()[len(held):]  # drawn once the pause ended
