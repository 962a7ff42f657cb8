"""A prompt's way from ``Conversation.send`` to the agent's stdin: a straight line, in four files.

The hops are the functions entered from ``conv.send`` until the one stdin
write, traced with ``sys.setprofile`` over a real fixture agent; what is not
a hop is left out by rule, not by name: constructors of plain values, the
``TurnStarted`` event's delivery (the owner's ``on_events``, the turn rules),
and what the codec calls inside ``encode_turn``.  docs/architecture.md walks
the same hops.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import trio

from agentrt import open_conversation

from .test_conversation import ENV, PLUGINS, launch

_SIDE = ("on_events", "encode_turn", "content_text", "Turn.text")  # their callees are not hops


def _hop(frame: FrameType) -> str | None:
    """``file:qualname`` when ``frame`` is a hop of the prompt's path, else ``None``."""
    code = frame.f_code
    if code.co_filename.startswith("<") or code.co_name in ("__init__", "<genexpr>"):
        return None  # a plain value being built (attrs-generated or not)
    if "agentrt" not in code.co_filename or "/trio/" in code.co_filename:
        return None
    if code.co_qualname.startswith("TurnRules.") or code.co_qualname.endswith(
        ("on_events", "content_text", "Turn.text")
    ):
        return None  # the TurnStarted event on its way to the turn and the sinks: the stdout line's walk
    outer = frame.f_back
    while outer is not None:
        if outer.f_code.co_qualname.endswith(_SIDE) or outer.f_code.co_qualname.startswith("TurnRules."):
            return None  # inside a side step
        outer = outer.f_back
    return f"{os.path.basename(code.co_filename)}:{code.co_qualname}"


async def trace_prompt(tmp_path: Path) -> list[str]:
    """The prompt's hops, in order, from ``Conversation.send`` to the stdin write."""
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, parent_env=ENV) as conv:
        await conv.ask("warm")  # the process runs: the path of a turn, not of a spawn
        hops: list[str] = []
        written = False

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal written
            if event != "call" or written:
                return
            if frame.f_code.co_name == "send_all" and hops and hops[-1].endswith("Pipes.send"):
                written = True  # the stdin write itself: the path ends here
                return
            hop = _hop(frame)
            if hop is not None and hop not in hops:
                hops.append(hop)

        with trio.fail_after(30):  # hang guard only
            sys.setprofile(profile)
            try:
                stream = conv.send("hello")
                async for _ in stream:
                    if written:
                        sys.setprofile(None)
            finally:
                sys.setprofile(None)
    assert written, hops
    return hops


async def test_a_prompt_reaches_stdin_in_at_most_ten_hops_over_four_files(tmp_path: Path) -> None:
    hops = await trace_prompt(tmp_path)
    assert hops[0] == "_conversation.py:Conversation.send" and hops[-1] == "_wire.py:Pipes.send", hops
    assert len(hops) <= 10, "\n".join(hops)
    files = {hop.split(":")[0] for hop in hops}
    assert len(files) <= 4, files  # the conversation, the engine, the wire and the dialect's codec
