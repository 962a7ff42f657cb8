"""Fixture child: streams events into the sqlite sink until it is killed.

After each ``handle()`` returns it prints ``<events handed so far> <wall time>``
on stdout (unbuffered), which is the record the parent compares the database with.
"""

import os
import sys
import time
from pathlib import Path

import trio

from agentrt.events import EventBatch, TextDelta, ToolResult
from agentrt_sqlite._sink import SqliteSink


async def main(path: str) -> None:
    sink = SqliteSink(Path(path))
    seq = 0
    n = 0
    while True:
        n += 1
        events = tuple(TextDelta(text=f"delta {seq + i} " * 3) for i in range(7))
        if n % 50 == 0:  # now and then a big one, as tool results are
            events += (ToolResult(tool_use_id="t", content="x" * 200_000),)
        await sink.handle(EventBatch(source="kill", first_seq=seq, mono=trio.current_time(),
                                     wall=time.time(), events=events))
        seq += len(events)
        os.write(1, f"{seq} {time.time()!r}\n".encode())
        await trio.sleep(0.001)


trio.run(main, sys.argv[1])
