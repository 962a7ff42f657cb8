"""Cyclic-garbage-collector settings for a process that streams agent output."""

from __future__ import annotations

import gc

__all__ = ["STREAMING_GEN0_THRESHOLD", "tune_gc"]

STREAMING_GEN0_THRESHOLD = 100_000
"""The young-generation threshold :func:`tune_gc` sets (CPython's default is 700)."""


def tune_gc(threshold: int = STREAMING_GEN0_THRESHOLD) -> tuple[int, int, int]:
    """Tune CPython's cyclic collector for streaming; returns the thresholds it replaced.

    CPython starts a young collection when the tracked objects allocated
    since the last one, net of those freed, pass the threshold.  The objects
    a streaming host makes per output line (the parsed line, its event) die
    within one read, so streaming itself seldom triggers one: a 100k-line run
    measured about one collection per 7,000 lines, under 1% of its CPU, with
    CPython's settings or these (``gc_ms`` in ``python -m bench host_path``).
    What the collector costs a short-lived streaming process is its start:
    imports leave tens of thousands of long-lived objects (functions,
    classes, modules) that the default threshold of 700 walks and promotes
    again and again; the ``agentrt run`` process measured about 100
    collections, 25-35 ms of CPU, before its first line.  This function:

    * freezes what is alive now (modules, classes, plugins: they live as long
      as the process), so no collection walks them again;
    * raises the young threshold to ``threshold`` (never lowers it), so the
      imports still to come (a command's own modules) trigger no collection
      either: with 20,000 that process still made two, of some 20,000 live
      objects each (about 20 ms); with 100,000, none after the call.

    Process-wide, so the ``agentrt`` command calls it at start (set
    ``AGENTRT_GC=default`` to keep CPython's settings) and a program embedding
    agentrt decides for itself.  Restore with ``gc.set_threshold(*previous)``
    (and ``gc.unfreeze()``).  Cyclic garbage lives longer: at most
    ``threshold`` new objects before the next young collection.
    """
    if threshold < 1:
        raise ValueError("threshold must be at least 1")
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(previous[0], threshold), previous[1], previous[2])
    return previous
