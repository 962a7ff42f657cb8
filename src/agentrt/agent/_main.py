"""The process entry point: run :func:`serve` on the real stdin/stdout under trio."""

from __future__ import annotations

import os
from collections.abc import Sequence

import trio

from ._io import open_stdio
from ._serve import serve

__all__ = ["main"]


async def _amain(argv: Sequence[str]) -> int:
    source, sink = open_stdio()
    try:
        return await serve(argv, dict(os.environ), source, sink)
    finally:
        with trio.CancelScope(shield=True):
            await source.aclose()
            await sink.aclose()


def main(argv: Sequence[str]) -> int:
    """Run the agent with ``argv`` (the arguments after ``agent``); return the exit status."""
    return trio.run(_amain, list(argv))
