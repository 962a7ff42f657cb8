"""Cyclic-garbage-collector settings for a process that streams agent output."""

from __future__ import annotations

import gc

__all__ = ["STREAMING_GEN0_THRESHOLD", "tune_gc"]

STREAMING_GEN0_THRESHOLD = 20_000
"""The young-generation threshold :func:`tune_gc` sets (CPython's default is 700)."""


def tune_gc(threshold: int = STREAMING_GEN0_THRESHOLD) -> tuple[int, int, int]:
    """Tune CPython's cyclic collector for streaming; returns the thresholds it replaced.

    A streaming host allocates a few container objects per output line (the
    parsed line, its event) that die within one received chunk.  With the
    default young threshold of 700, a chunk of a few hundred lines triggers a
    collection while its objects are still alive: they are walked, promoted
    and walked again, which measured about a third of a microsecond per text
    delta line.  This function:

    * freezes what is alive now (modules, classes, plugins: they live as long
      as the process), so full collections stop walking them;
    * raises the young threshold to ``threshold`` (never lowers it), so a
      collection mostly finds objects that are already gone.

    Process-wide, so the ``agentrt`` command calls it at start (set
    ``AGENTRT_GC=default`` to keep CPython's settings) and a program embedding
    agentrt decides for itself.  Restore with ``gc.set_threshold(*previous)``
    (and ``gc.unfreeze()``).  Cyclic garbage lives a little longer: at most
    ``threshold`` new objects before the next young collection.
    """
    if threshold < 1:
        raise ValueError("threshold must be at least 1")
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(previous[0], threshold), previous[1], previous[2])
    return previous
