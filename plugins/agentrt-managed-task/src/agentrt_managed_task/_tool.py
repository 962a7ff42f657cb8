"""The ``awp_run_managed_task`` tool: validate, submit with an idempotency key, poll to a deadline (§B)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import trio

from agentrt import AgentrtError
from agentrt.tools import ToolContext

from ._client import ControlPlaneClient, TransportFailure
from ._config import ClientConfig
from ._jsjson import idempotency_key, js_length, js_slice

__all__ = ["ManagedTaskTool", "TOOL_NAME", "TOOL_DESCRIPTION", "TOOL_PARAMETERS", "validate_arguments"]

TOOL_NAME = "awp_run_managed_task"
TOOL_DESCRIPTION = (
    "Run one operator-allow-listed command on the configured trusted AWP worker and wait for its result. "
    "This is not sandboxed; use only for explicitly requested trusted execution."
)
TOOL_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["argv"],
    "properties": {
        "argv": {
            "type": "array",
            "minItems": 1,
            "maxItems": 32,
            "items": {"type": "string", "maxLength": 8192},
        },
        "timeout_seconds": {"type": "number", "minimum": 1, "maximum": 300, "default": 60},
    },
}
DEFAULT_TIMEOUT = 60
MAX_ARGV_ITEMS = 32
MAX_ARG_LENGTH = 8192
MAX_ARGV_BYTES = 64 * 1024
MAX_OUTPUT_LENGTH = 65536
_EXECUTABLE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
STATUSES = frozenset({"pending", "running", "success", "failed", "error", "cancelled"})
TERMINAL = frozenset({"success", "failed", "error", "cancelled"})


def validate_arguments(arguments: Mapping[str, Any]) -> tuple[list[str], int | float]:
    """Check the model's arguments exactly as §B does; ``(argv, timeout_seconds)``."""
    if not isinstance(arguments, Mapping) or not set(arguments) <= {"argv", "timeout_seconds"}:
        raise AgentrtError("managed_task_arguments_invalid", "only argv and timeout_seconds are accepted")
    argv = arguments.get("argv")
    if (
        not isinstance(argv, list)
        or not 1 <= len(argv) <= MAX_ARGV_ITEMS
        or not all(isinstance(a, str) and a and js_length(a) <= MAX_ARG_LENGTH and "\0" not in a for a in argv)
        or not _EXECUTABLE.match(argv[0])
    ):
        raise AgentrtError(
            "managed_task_argv_invalid",
            "argv must be 1..32 non-empty strings and argv[0] a bare command name",
        )
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in argv) > MAX_ARGV_BYTES:
        raise AgentrtError("managed_task_argv_oversize", "argv exceeds 64 KiB")
    timeout = arguments.get("timeout_seconds", DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 1 <= timeout <= 300
    ):
        raise AgentrtError("managed_task_timeout_invalid", "timeout_seconds must be a number from 1 to 300")
    return list(argv), timeout


def _bounded_text(value: Any) -> str:
    return js_slice(value, MAX_OUTPUT_LENGTH) if isinstance(value, str) else ""


def _outcome(task_id: str, row: Mapping[str, Any]) -> dict[str, Any]:
    result = row.get("result")
    output = result.get("output") if isinstance(result, Mapping) else None
    output = output if isinstance(output, Mapping) else {}
    exit_code = output.get("exit_code")
    return {
        "task_id": task_id,
        "status": row["status"],
        "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        "stdout": _bounded_text(output.get("stdout")),
        "stderr": _bounded_text(output.get("stderr")),
    }


def _check_row(row: Mapping[str, Any], expected_id: str | None = None) -> str:
    task_id = row.get("id")
    if not isinstance(task_id, str) or not _UUID.match(task_id) or (expected_id and task_id != expected_id):
        raise AgentrtError("invalid_control_plane_task_id", "the control plane returned an invalid task id")
    if row.get("status") not in STATUSES:
        raise AgentrtError("invalid_control_plane_task_status", "the control plane returned an unknown status")
    return task_id


class ManagedTaskTool:
    """Runs one allow-listed command on a trusted worker through the control plane."""

    name = TOOL_NAME
    description = TOOL_DESCRIPTION
    parameters = TOOL_PARAMETERS

    def __init__(self, config: ClientConfig) -> None:
        self._config = config

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Submit the command and wait for its terminal state or the deadline.

        Returns ``{task_id, status, exit_code, stdout, stderr}``; ``status`` is ``timeout`` when the
        deadline passed first (we stopped waiting; the task may still run).  A failure after the task
        was submitted returns ``{"error": "control_plane_outcome_unknown", "reason", "task_id"}``.
        """
        argv, timeout = validate_arguments(arguments)
        key = idempotency_key(context.session_id, context.turn_identity, context.tool_call_id, argv, timeout)
        body = {"task_type": "command", "payload": {"argv": argv}, "idempotency_key": key}
        # Math.round parity (half up, not half to even): the reference waits round(timeout*1000) ms.
        deadline = trio.current_time() + math.floor(timeout * 1000 + 0.5) / 1000
        client = ControlPlaneClient(self._config)
        try:
            try:
                row = await client.request("POST", "/v1/tasks", body)
            except TransportFailure as exc:
                if not exc.connected:
                    raise
                # The request may have been stored; repeating this call with the same key is safe.
                return {"error": "control_plane_outcome_unknown", "reason": exc.code, "task_id": None}
            task_id = _check_row(row)
            try:
                # As the reference: poll right after submitting, then every poll_interval until the deadline.
                while trio.current_time() < deadline:
                    row = await client.request("GET", f"/v1/tasks/{task_id}")
                    _check_row(row, task_id)
                    if row["status"] in TERMINAL:
                        break
                    await trio.sleep(min(self._config.poll_interval, max(0.0, deadline - trio.current_time())))
                else:
                    return {
                        "task_id": task_id,
                        "status": "timeout",
                        "exit_code": None,
                        "stdout": "",
                        "stderr": "",
                    }
            except AgentrtError as exc:
                return {"error": "control_plane_outcome_unknown", "reason": exc.code, "task_id": task_id}
            return _outcome(task_id, row)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await client.aclose()
