"""C allocator settings for a process that streams agent output (glibc only)."""

from __future__ import annotations

import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_malloc"]

MMAP_THRESHOLD = 4 << 20
"""Blocks at least this large get pages of their own (glibc's default starts at 128 KiB and moves)."""

TRIM_THRESHOLD = 8 << 20
"""Free memory at the heap's top kept for reuse before it goes back to the system."""

# mallopt's parameter numbers (malloc.h), stable across glibc versions.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The user's own allocator settings win: with any of these set, nothing is changed.
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")


def tune_malloc() -> bool:
    """Keep a few MiB of freed memory for reuse under glibc; True when the settings were applied.

    A streaming host frees a batch's worth of medium buffers at a time (the
    chunk read, its lines, the rendered output, a tool result's text).  glibc
    gives memory back to the system whenever more than its trim threshold is
    free at the top of the heap, and maps blocks past its mmap threshold one by
    one (both start at 128 KiB and move with the blocks freed), so every batch
    pages the same memory in again: ``agentrt run --json`` on the 100k-line
    bench session took about 71,000 page faults, and a fifth to a quarter of
    its CPU was the kernel's.  With blocks up to :data:`MMAP_THRESHOLD` from the
    heap and :data:`TRIM_THRESHOLD` kept at its top it took about 14,000, for
    about 2 MiB more at its peak.

    Process-wide and not undone (glibc's dynamic thresholds stay off once set),
    so the ``agentrt`` command calls it at start (``AGENTRT_MALLOC=default``
    keeps glibc's behaviour) and a program embedding agentrt decides for
    itself.  Changes nothing, and returns False, off glibc or when the
    environment already holds allocator settings (``MALLOC_TRIM_THRESHOLD_``
    and the like, or ``glibc.malloc`` tunables in ``GLIBC_TUNABLES``).
    """
    if sys.platform != "linux" or any(name in os.environ for name in _USER_SETTINGS):
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, ImportError, OSError, ValueError):  # not glibc, or no ctypes
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
