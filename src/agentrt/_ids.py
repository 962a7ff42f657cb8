"""Conversation ids: UUID-shaped and unique across processes and hosts, without a system call per id.

``str(uuid.uuid4())`` reads 16 bytes from the kernel and builds a
:class:`uuid.UUID` for every id: a few percent of the owner's work when a
program starts a thousand conversations.  :func:`new_id` draws 74 random bits
once per process and counts in the last 48 bits instead.  Its ids have the
shape of a version-4 UUID (``xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx``,
version and variant bits in place), so nothing that reads or stores them
changes; two ids of one process differ by the counter, and ids of two
processes (or hosts) differ unless their 74 random bits agree.  A forked
child draws a prefix of its own before its first id (``os.register_at_fork``),
so a parent and its fork never hand out the same id.

The ids name, they never authorise: consecutive ids of one process share
their prefix, so one id tells the next.  Use :mod:`secrets` for anything a
holder must not guess.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["new_id"]

_COUNTER_LIMIT = 1 << 48  # the last group: 12 hex digits

# (prefix, counter), replaced whole: a thread reads one pair, never a half-updated one.
_state: tuple[str, itertools.count[int]] | None = None


def _draw() -> tuple[str, itertools.count[int]]:
    global _state
    bits = int.from_bytes(os.urandom(10), "big")  # 80 bits drawn, 74 used
    prefix = (
        f"{bits >> 48:08x}-{(bits >> 32) & 0xFFFF:04x}-"
        f"4{(bits >> 20) & 0xFFF:03x}-{0x8000 | ((bits >> 6) & 0x3FFF):04x}-"
    )
    state = _state = (prefix, itertools.count())
    return state


def _forget() -> None:
    global _state
    _state = None


def new_id() -> str:
    """A new id, ``str(uuid.uuid4())``-shaped, unique in practice across processes and hosts (see the module doc)."""
    state = _state or _draw()
    number = next(state[1])
    if number >= _COUNTER_LIMIT:  # after 2**48 ids: a new prefix rather than a repeat
        state = _draw()
        number = next(state[1])
    return f"{state[0]}{number:012x}"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
