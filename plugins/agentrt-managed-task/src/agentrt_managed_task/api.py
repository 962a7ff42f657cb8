"""The public API of agentrt-managed-task: the tool, the control plane, its storage, the worker.

Import from here (the underscore modules are private)::

    from agentrt_managed_task.api import ControlPlaneSettings, Worker, WorkerSettings, open_store
"""

from __future__ import annotations

from ._config import ClientConfig, validate_control_plane_url, validate_token
from ._jsjson import idempotency_key, task_digest_input
from ._runner import RunOutcome, run_command
from ._server import ControlPlaneSettings, build_app, check_bind_host, load_api_key, open_store, serve_control_plane
from ._store import (
    LEASE_EXPIRED_MESSAGE,
    AgentOffline,
    Store,
    StoreConflict,
    StoreCore,
    StoreNotFound,
    TaskRow,
    ThreadedStore,
)
from ._tool import TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, ManagedTaskTool, validate_arguments
from ._worker import Worker, WorkerSettings, resolve_allowlist

__all__ = [
    "AgentOffline",
    "ClientConfig",
    "ControlPlaneSettings",
    "LEASE_EXPIRED_MESSAGE",
    "ManagedTaskTool",
    "RunOutcome",
    "Store",
    "StoreConflict",
    "StoreCore",
    "StoreNotFound",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_PARAMETERS",
    "TaskRow",
    "ThreadedStore",
    "Worker",
    "WorkerSettings",
    "build_app",
    "check_bind_host",
    "idempotency_key",
    "load_api_key",
    "open_store",
    "resolve_allowlist",
    "run_command",
    "serve_control_plane",
    "task_digest_input",
    "validate_arguments",
    "validate_control_plane_url",
    "validate_token",
]
