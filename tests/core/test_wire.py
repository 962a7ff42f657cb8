"""The agent's wire (``agentrt._wire``): a reply's chunk reaches the engine through one core module.

Traced with ``sys.setprofile`` over a real fixture agent, as
tests/core/test_prompt_path.py traces a prompt: every function entered from
the read that brings a chunk back until the engine's ``HostedProcess._events``
gets the chunk's events.  The codec's own work inside ``decode_lines`` (its
helpers, and the general way of a line it does not take) is the dialect's,
not the wire's: its callees are left out by rule.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import trio

from agentrt import open_conversation
from agentrt.events import TurnCompleted

from .test_conversation import ENV, PLUGINS, launch


def _where(frame: FrameType) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_qualname}"


def _inside_decode_lines(frame: FrameType) -> bool:
    outer = frame.f_back
    while outer is not None:
        if outer.f_code.co_qualname.endswith("decode_lines"):
            return True
        outer = outer.f_back
    return False


async def test_a_chunk_reaches_the_engine_through_the_wire_and_the_codec_alone(tmp_path: Path) -> None:
    async with open_conversation(launch(tmp_path), plugins=PLUGINS, parent_env=ENV) as conv:
        await conv.ask("warm")  # the process runs: the path of a turn, not of a spawn
        entered: list[str] = []
        chunks = 0
        reading = False

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal chunks, reading
            code = frame.f_code
            if "/trio/" in code.co_filename or "agentrt" not in code.co_filename:
                return
            if event == "return" and code.co_qualname.endswith("receive_some") and type(arg) is bytes and arg:
                reading = True  # a chunk came back: its way to the engine starts here, in the loop it returns to
                chunks += 1
                for hop in (_where(frame), _where(frame.f_back) if frame.f_back is not None else "?"):
                    if hop not in entered:
                        entered.append(hop)
                return
            if event != "call" or not reading:
                return
            if code.co_qualname == "HostedProcess._events":
                reading = False  # the engine has the chunk's events
                return
            if code.co_filename.startswith("<") or code.co_name == "__init__" or _inside_decode_lines(frame):
                return  # a plain value being built, or the codec's own work
            if _where(frame) not in entered:
                entered.append(_where(frame))

        with trio.fail_after(30):  # hang guard only
            sys.setprofile(profile)
            try:
                result = await conv.ask("hello")
            finally:
                sys.setprofile(None)
    assert isinstance(result, TurnCompleted) and chunks >= 1, (result, entered)
    assert entered[:2] == ["_wire.py:Pipes.receive_some", "_wire.py:Pump.read"], entered
    assert "_wire.py:LineCut.cut" in entered, entered
    files = {hop.split(":")[0] for hop in entered}
    codec = {hop.split(":")[0] for hop in entered if hop.endswith(".decode_lines")}
    assert len(codec) == 1, entered  # the dialect's one decode call per chunk
    assert files == {"_wire.py"} | codec, entered
