"""What an idle conversation keeps alive in its parent (Linux, a real fixture agent)."""

from __future__ import annotations

import gc
import os
import types
from contextlib import AsyncExitStack
from pathlib import Path

import trio

from agentrt import open_conversation
from agentrt._plugins import Plugins
from agentrt.dialect import HostCodec
from agentrt.events import TurnCompleted

from .test_conversation import launch

PLUGINS = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "awp-jsonl"})
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


def _codec_methods() -> int:
    # Only live ones: codecs of earlier tests may still wait in a cycle for the collector,
    # which could run between two counts and make the second one smaller.
    gc.collect()
    return sum(
        1 for o in gc.get_objects() if type(o) is types.MethodType and isinstance(o.__self__, HostCodec)
    )


async def test_an_idle_codec_holds_no_bound_methods_until_it_decodes(tmp_path: Path) -> None:
    # A thousand idle conversations are a thousand codecs: a dispatch table of
    # bound methods built per codec at start was 11 objects and a cycle each
    # before any output came.  Built on the first decode instead, and decoding still works.
    spec = launch(tmp_path)
    with trio.fail_after(120):  # hang guard only
        async with AsyncExitStack() as stack:
            before = _codec_methods()
            convs = [
                await stack.enter_async_context(open_conversation(spec, plugins=PLUGINS, parent_env=ENV))
                for _ in range(5)
            ]
            assert _codec_methods() == before
            assert isinstance(await convs[0].ask("hello"), TurnCompleted)
            assert _codec_methods() > before
