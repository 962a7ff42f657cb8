"""Bounded waits on conditions the tests cannot subscribe to (a store row, a file, another process).

Each wait re-checks its condition until it holds; the bound is a hang guard, generous enough for a
loaded machine, never an assertion about speed. A process exit is waited on with a pidfd, which the
kernel makes readable when the process ends: an event, not a poll.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

BOUND = 60.0
# How often a condition is re-checked: the cadence of a poll, not a guess at how long anything takes.
_RECHECK = 0.02


async def wait_until(check: Callable[[], Awaitable[Any] | Any], *, bound: float = BOUND) -> Any:
    """Return the first truthy value of ``check()`` (sync or async); ``trio.TooSlowError`` past ``bound``."""
    with trio.fail_after(bound):
        while True:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            await trio.sleep(_RECHECK)


async def wait_file(path: Path, *, bound: float = BOUND) -> str:
    """The non-empty text of ``path`` once something wrote it."""
    return str(await wait_until(lambda: path.exists() and path.read_text(), bound=bound))


async def wait_exited(pid: int, *, bound: float = BOUND) -> None:
    """Wait until process ``pid`` (not necessarily our child) has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with trio.fail_after(bound):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
