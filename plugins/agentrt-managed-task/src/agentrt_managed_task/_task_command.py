"""One claimed task run by the worker (§C): its argv checked against the allowlist, run in a fresh directory.

The worker (``_worker.Worker``) claims, renews and delivers; this module only turns one claimed row
into a result body, so it holds no state of its own.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from ._runner import run_command
from ._worker_settings import _FIXED_ENV, WorkerSettings

__all__ = ["run_task", "failure", "MAX_ARGS", "MAX_ARG_LENGTH", "LOG_TAIL"]

MAX_ARGS = 128
MAX_ARG_LENGTH = 8192
LOG_TAIL = 100_000


async def run_task(s: WorkerSettings, runs: Path, row: Mapping[str, Any]) -> dict[str, Any]:
    """Run one claimed ``command`` task in a fresh directory under ``runs``; its result body (never raises OSError)."""
    payload = row.get("payload")
    argv = payload.get("argv") if isinstance(payload, dict) else None
    problem = None
    if row.get("task_type") != "command":
        problem = "unsupported task type"
    elif (
        not isinstance(argv, list)
        or not 1 <= len(argv) <= MAX_ARGS
        or not all(isinstance(a, str) and len(a) <= MAX_ARG_LENGTH and "\0" not in a for a in argv)
    ):
        problem = "invalid argv"
    elif argv[0] not in s.allowed:
        problem = "command is not allowlisted"
    if problem is not None or not isinstance(argv, list):
        return failure(problem or "invalid argv")
    run_dir = runs / f"{row['id']}--{secrets.token_hex(8)}"
    try:
        await trio.Path(run_dir / "tmp").mkdir(parents=True, mode=0o700)
        env = {
            "HOME": str(run_dir),
            "PATH": s.trusted_path,
            "TMPDIR": str(run_dir / "tmp"),
            "TEMP": str(run_dir / "tmp"),
            "TMP": str(run_dir / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "LC_CTYPE": "C.UTF-8",
            "TZ": "UTC",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONUTF8": "1",
        }
        env.update({k: v for k, v in s.allowed_env.items() if k not in _FIXED_ENV})
        outcome = await run_command(
            [s.allowed[argv[0]], *argv[1:]],
            cwd=str(run_dir),
            env=env,
            time_limit=s.timeout_seconds,
            max_output=s.max_output_bytes,
        )
    except OSError as exc:
        return failure(f"worker exception: {type(exc).__name__}", status="error")
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, run_dir, True)
    ok = outcome.exit_code == 0 and not outcome.timed_out
    return {
        "status": "success" if ok else "failed",
        "output": outcome.output(),
        "logs": outcome.stdout[-LOG_TAIL:],
        "duration_s": outcome.duration_s,
    }


def failure(message: str, *, status: str = "error") -> dict[str, Any]:
    """A result body for a task that did not run (or whose run the worker could not finish)."""
    return {
        "status": status,
        "output": {"stdout": "", "exit_code": -1, "timed_out": False, "canceled": False, "truncated": False},
        "logs": message,
        "duration_s": 0.0,
    }
