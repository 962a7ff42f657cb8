"""The jsonl-file sink: every event as one JSON line, appended to a file.

Each line is ``{"source", "seq", "wall", "event"}`` with the event in agentrt's
JSON form (:func:`agentrt.events.to_json`).  The file is written from a worker
thread, one batch per round trip, so the trio thread never waits on the disk;
the policy is ``block``: nothing is dropped, a slow disk slows the
conversation down instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Literal

import orjson
import trio

from agentrt.errors import ConfigError
from agentrt.events import EventBatch, to_json

__all__ = ["JsonlFileSink", "path_from_options"]


def path_from_options(options: Mapping[str, Any]) -> Path:
    """``options["path"]``, else ``EXAMPLE_JSONL_FILE`` from ``options["env"]``: an absolute file path."""
    env = options.get("env")
    raw = options.get("path") or (env.get("EXAMPLE_JSONL_FILE") if isinstance(env, Mapping) else None)
    if not isinstance(raw, (str, os.PathLike)) or not os.path.isabs(raw) or "\x00" in os.fspath(raw):
        raise ConfigError("jsonl_file_invalid", "set EXAMPLE_JSONL_FILE (or the path option) to an absolute file path")
    return Path(raw)


class JsonlFileSink:
    """An :class:`agentrt.sinks.Sink` appending JSON lines to ``path``."""

    name = "jsonl-file"
    policy: Literal["block"] = "block"
    buffer_size = 64

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self._closed = False

    async def handle(self, batch: EventBatch) -> None:
        """Append the batch's events (one worker-thread round trip)."""
        if self._closed:
            return
        data = b"".join(
            orjson.dumps({"source": batch.source, "seq": batch.first_seq + i, "wall": batch.wall,
                          "event": to_json(event)}) + b"\n"
            for i, event in enumerate(batch.events)
        )
        if data:
            await trio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        if self._file is None:
            self._file = open(self.path, "ab")  # noqa: SIM115 (kept open across batches, closed by aclose)
        self._file.write(data)

    async def aclose(self) -> None:
        """Flush and close the file; a second call does nothing."""
        self._closed = True
        if self._file is not None:
            file, self._file = self._file, None
            await trio.to_thread.run_sync(file.close)
