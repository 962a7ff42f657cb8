"""Run one allow-listed command for the worker: no shell, own process group, bounded time and output.

The command dies with the worker (``agentrt.lowlevel.open_owned_process``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

import attrs
import trio

from agentrt.lowlevel import OwnedProcess, open_owned_process

__all__ = ["RunOutcome", "run_command"]


@attrs.frozen(kw_only=True)
class RunOutcome:
    """What one run produced (stderr was merged into ``stdout``)."""

    stdout: str
    exit_code: int
    timed_out: bool
    truncated: bool
    duration_s: float

    def output(self, *, canceled: bool = False) -> dict[str, object]:
        """The ``output`` object of a result (§C)."""
        return {
            "stdout": self.stdout,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "canceled": canceled,
            "truncated": self.truncated,
        }


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the whole group is already gone


async def _stop_group(process: OwnedProcess) -> None:
    """SIGTERM to the group, 1 s, SIGKILL, 1 s: the §C tree kill.  Shielded: always runs to the end."""
    with trio.CancelScope(shield=True):
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with trio.move_on_after(1.0):
                await process.wait()
        # Also catches grandchildren left in the group after the leader exited.
        _signal_group(process.pid, signal.SIGKILL)
        with trio.move_on_after(1.0):
            await process.wait()


async def run_command(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str], time_limit: float, max_output: int
) -> RunOutcome:
    """Run ``argv`` (``argv[0]`` absolute) to completion, its timeout, or cancellation.

    Output past ``max_output`` bytes is read and discarded (so the child never blocks on a full
    pipe) and ``truncated`` is set.  Cancellation kills the process group before propagating.
    """
    started = trio.current_time()
    # Owned: the command dies with the worker, even a SIGKILLed one, so it never
    # runs on while its task is retried elsewhere.
    process = await open_owned_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, env=env
    )
    kept = bytearray()
    truncated = False
    stream = process.stdout
    drained = trio.Event()
    assert stream is not None

    async def drain() -> None:
        nonlocal truncated
        while chunk := await stream.receive_some(65536):
            room = max_output - len(kept)
            if len(chunk) > room:
                truncated = True
                chunk = chunk[:room]
            kept.extend(chunk)
        drained.set()

    try:
        with trio.move_on_after(time_limit) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                await process.wait()
                # A grandchild may still hold the pipe open: give it a moment, then stop reading.
                with trio.move_on_after(1.0):
                    await drained.wait()
                nursery.cancel_scope.cancel()
    finally:
        await _stop_group(process)
        with trio.CancelScope(shield=True):
            await stream.aclose()
    timed_out = scope.cancelled_caught
    code = process.returncode
    return RunOutcome(
        stdout=kept.decode("utf-8", "replace"),
        exit_code=-1 if code is None else code,
        timed_out=timed_out,
        truncated=truncated,
        duration_s=round(trio.current_time() - started, 6),
    )
