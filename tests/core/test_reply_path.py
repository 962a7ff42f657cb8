"""A reply's way from the agent's stdout to the caller's ``async for``, and the files one turn is read in.

The hops are traced with ``sys.setprofile`` over a real fixture agent, as
tests/core/test_prompt_path.py traces the prompt's: from the read that brings
the reply's text delta back into the read loop, through the codec, the engine
and the turn rules, to the turn's channel; then the caller's side, from
``TurnStream.__anext__`` taking the chunk to its return of the delta.  What is
not a hop is left out by rule, not by name: constructors of plain values, what
the codec calls inside its ``decode_lines`` (its own helpers, the framing's
parse of a line it does not take), the fan-out's delivery to the sinks (the
stdout line's walk in docs/architecture.md follows that), and the read loop's
bookkeeping after the chunk's events were handed over (the codec's owed
output, parking).  docs/architecture.md walks the same hops.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import trio

from agentrt import open_conversation
from agentrt.events import TextDelta

from .test_conversation import ENV, PLUGINS, launch
from .test_prompt_path import trace_prompt

_SIDE = ("decode_lines", "Fanout.send")  # their callees are not hops


def _where(frame: FrameType) -> str:
    code = frame.f_code
    return f"{os.path.basename(code.co_filename)}:{code.co_qualname}"


def _hop(frame: FrameType) -> str | None:
    """``file:qualname`` when ``frame`` is a hop of the reply's path, else ``None``."""
    code = frame.f_code
    if code.co_filename.startswith("<") or code.co_name in ("__init__", "<genexpr>", "<listcomp>"):
        return None  # a plain value being built
    if "agentrt" not in code.co_filename or "/trio/" in code.co_filename:
        return None
    outer = frame.f_back
    while outer is not None:
        if outer.f_code.co_qualname.endswith(_SIDE):
            return None  # inside a side step
        outer = outer.f_back
    return _where(frame)


async def trace_reply(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The reply's hops: (from the read to the turn's channel, from the caller's ``__anext__`` to the delta)."""
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, parent_env=ENV) as conv:
        await conv.ask("warm")  # the process runs: the path of a turn, not of a spawn
        reading: list[str] = []
        caller: list[str] = []
        hops: list[str] | None = None
        done = False

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal hops, done
            if done:
                return
            name = frame.f_code.co_qualname
            if (
                event == "return"
                and name.endswith("receive_some")
                and "agentrt" in frame.f_code.co_filename
                and type(arg) is bytes
                and b"text_delta" in arg
                and frame.f_back is not None
            ):
                # The chunk with the reply's delta is read: the read and the loop it returns to are the first hops.
                hops = reading
                reading.extend([_where(frame), _where(frame.f_back)])
                return
            if event == "call" and name.endswith("send_nowait") and hops is reading:
                hops = None  # the events are on the turn's channel: the read loop's part ends here
                return
            if event == "call" and name == "TurnStream.__anext__" and reading and hops is None:
                hops = caller  # the caller takes the chunk from the channel
            if event == "return" and name == "TurnStream.__anext__" and type(arg) is TextDelta and hops is caller:
                done = True
                return
            if event != "call" or hops is None:
                return
            hop = _hop(frame)
            if hop is not None and hop not in hops:
                hops.append(hop)

        with trio.fail_after(30):  # hang guard only
            stream = conv.send("hello")
            sys.setprofile(profile)
            try:
                async for _ in stream:
                    if done:
                        sys.setprofile(None)
            finally:
                sys.setprofile(None)
    assert done, (reading, caller)
    return reading, caller


def _files(hops: list[str]) -> set[str]:
    return {hop.split(":")[0] for hop in hops}


async def test_a_reply_reaches_the_caller_in_at_most_five_files(tmp_path: Path) -> None:
    reading, caller = await trace_reply(tmp_path)
    path = reading + caller
    assert reading[0].endswith(":Pipes.receive_some") and caller[-1] == "_conversation.py:TurnStream._receive", path
    assert len(path) <= 14, "\n".join(path)
    # The read loop and its pipes, the dialect's codec, the engine, the turn rules with the
    # conversation's owner, and the caller's TurnStream.
    assert len(_files(path)) <= 5, _files(path)


async def test_one_turn_is_read_in_five_files(tmp_path: Path) -> None:
    reading, caller = await trace_reply(tmp_path)
    (tmp_path / "prompt").mkdir()
    prompt = await trace_prompt(tmp_path / "prompt")
    files = _files(prompt) | _files(reading + caller)
    assert files == {"_conversation.py", "_engine.py", "_wire.py", "codec.py", "_turns.py"}, files
