"""The control plane's HTTP API (§C): starlette under hypercorn's trio worker; SQLite in a thread, Redis on trio."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import os
import re
import uuid
from typing import Any, cast

import orjson
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentrt import AgentrtError
from agentrt.net import is_loopback_host

from ._cp_settings import ControlPlaneSettings, load_api_key
from ._store import AgentOffline, Store, StoreConflict, StoreNotFound, ThreadedStore

__all__ = ["ControlPlaneSettings", "build_app", "serve_control_plane", "open_store", "load_api_key"]

log = logging.getLogger("agentrt.control_plane")
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_LOGS = 1_000_000
RESULT_STATUSES = frozenset({"success", "failed", "error", "cancelled"})
TASK_STATUSES = frozenset({"pending", "running", "success", "failed", "error", "cancelled"})
_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_AGENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Retention: at most this many finished tasks forgotten per batch, and batches per maintenance pass.
_PURGE_BATCH = 500
_PURGE_BATCHES = 20


def _failure_name(exc: Exception) -> str:
    # A stable code when there is one (redis_unavailable), else the type: never the message.
    return exc.code if isinstance(exc, AgentrtError) else type(exc).__name__


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


async def _json_body(request: Request) -> Any:
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _HttpError(413, "request body too large")
        chunks.append(chunk)
    try:
        # orjson refuses what no store can keep (NaN/Infinity, lone surrogate escapes,
        # invalid UTF-8) and nesting deeper than 1024 levels, all as a ValueError:
        # bad input is a 422, never a 500 from a RecursionError or an encoder.
        return orjson.loads(b"".join(chunks))
    except ValueError as exc:
        raise _HttpError(422, "request body must be finite JSON in valid Unicode, nested at most 1024 deep") from exc


class _HttpError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def build_app(store: Store, settings: ControlPlaneSettings) -> Starlette:
    """The ASGI application (one store, one settings object)."""
    expected = None if settings.api_key is None else settings.api_key.encode()

    def authorise(request: Request) -> None:
        if expected is None:
            raise _HttpError(503, "control plane API key is not configured")
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            raise _HttpError(401, "invalid or missing bearer token")

    def endpoint(handler: Any) -> Any:
        async def wrapped(request: Request) -> Response:
            try:
                authorise(request)
                result = await handler(request)
            except _HttpError as exc:
                response = _error(exc.status, exc.detail)
                if exc.status == 401:
                    response.headers["www-authenticate"] = "Bearer"
                return response
            except StoreNotFound:
                return _error(404, "task not found")
            except StoreConflict as exc:
                return _error(409, exc.reason)
            except AgentOffline:
                return _error(409, "agent is offline; register first")
            except Exception as exc:
                # Storage failures (e.g. Redis unreachable) end here, not in starlette's error
                # middleware, which re-raises into the server: log the type, answer a bare 500.
                log.error("%s %s failed: %s", request.method, request.url.path, _failure_name(exc))
                return _error(500, "internal error")
            return result if isinstance(result, Response) else JSONResponse(result)

        return wrapped

    def task_id_of(request: Request) -> str:
        task_id = str(request.path_params["task_id"])
        if not _ID.match(task_id):
            raise _HttpError(404, "task not found")
        return task_id

    async def submit(request: Request) -> Any:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise _HttpError(422, "body must be an object")
        task_type = body.get("task_type", "command")
        payload = body.get("payload", {})
        key = body.get("idempotency_key")
        if not isinstance(task_type, str) or not 1 <= len(task_type) <= 64:
            raise _HttpError(422, "task_type must be a string of 1..64 characters")
        if not isinstance(payload, dict):
            raise _HttpError(422, "payload must be an object")
        if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 255):
            raise _HttpError(422, "idempotency_key must be a string of 1..255 characters")
        row, _created = await store.submit(task_type, payload, key)
        return row.public()

    async def list_tasks(request: Request) -> Any:
        status = request.query_params.get("status")
        if status is not None and status not in TASK_STATUSES:
            raise _HttpError(422, "unknown status")
        try:
            limit = int(request.query_params.get("limit", "100"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise _HttpError(422, "limit must be 1..1000")
        return [row.public() for row in await store.list_tasks(status, limit)]

    async def get_task(request: Request) -> Any:
        row = await store.get(task_id_of(request))
        if row is None:
            raise StoreNotFound("task")
        return row.public()

    async def register(request: Request) -> Any:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise _HttpError(422, "body must be an object")
        agent_id = body.get("agent_id") or str(uuid.uuid4())
        name = body.get("name") or agent_id
        if not isinstance(agent_id, str) or not _AGENT_ID.match(agent_id) or not isinstance(name, str):
            raise _HttpError(422, "agent_id must match [A-Za-z0-9._:-]{1,128}")
        await store.register_agent(agent_id, name[:256])
        return {"agent_id": agent_id, "lease_seconds": settings.lease_seconds}

    async def heartbeat(request: Request) -> Any:
        body = await _json_body(request)
        agent_id = body.get("agent_id") if isinstance(body, dict) else None
        if not isinstance(agent_id, str) or not await store.heartbeat_agent(agent_id):
            raise _HttpError(404, "agent not registered")
        return {"ok": True}

    async def pending(request: Request) -> Any:
        agent_id = request.query_params.get("agent_id", "")
        try:
            slots = int(request.query_params.get("slots", "1"))
        except ValueError:
            slots = 0
        if not 1 <= slots <= 64:
            raise _HttpError(422, "slots must be 1..64")
        rows = await store.claim(
            agent_id, slots, settings.lease_seconds, settings.max_retries, settings.agent_stale_seconds
        )
        return {"tasks": [row.public() for row in rows], "lease_seconds": settings.lease_seconds}

    async def task_heartbeat(request: Request) -> Any:
        task_id = task_id_of(request)
        body = await _json_body(request)
        attempt = body.get("attempt_id") if isinstance(body, dict) else None
        if not isinstance(attempt, str):
            raise _HttpError(422, "attempt_id is required")
        row = await store.renew(task_id, attempt, settings.lease_seconds)
        return {"id": row.id, "attempt_id": row.attempt_id, "lease_expires_at": row.lease_expires_at}

    async def result(request: Request) -> Any:
        task_id = task_id_of(request)
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise _HttpError(422, "body must be an object")
        attempt, status = body.get("attempt_id"), body.get("status")
        output, logs, duration = body.get("output", {}), body.get("logs", ""), body.get("duration_s", 0)
        if not isinstance(attempt, str) or status not in RESULT_STATUSES:
            raise _HttpError(422, "attempt_id and a status of success|failed|error|cancelled are required")
        if not isinstance(output, dict) or not isinstance(logs, str) or len(logs) > MAX_LOGS:
            raise _HttpError(422, "output must be an object and logs a string of at most 1e6 characters")
        if not _finite(duration) or duration < 0:
            raise _HttpError(422, "duration_s must be a finite non-negative number")
        stored = "success" if status == "success" else "failed"
        error = None if stored == "success" else logs[-2000:] or None
        row, duplicate = await store.complete(
            task_id, attempt, stored, {"output": output, "logs": logs, "duration_s": duration}, error
        )
        return {**row.public(), "duplicate": duplicate}

    routes = [
        Route("/v1/tasks", endpoint(submit), methods=["POST"]),
        Route("/v1/tasks", endpoint(list_tasks), methods=["GET"]),
        Route("/v1/tasks/{task_id}", endpoint(get_task), methods=["GET"]),
        Route("/v1/agent/register", endpoint(register), methods=["POST"]),
        Route("/v1/agent/heartbeat", endpoint(heartbeat), methods=["POST"]),
        Route("/v1/agent/tasks/pending", endpoint(pending), methods=["GET"]),
        Route("/v1/agent/tasks/{task_id}/heartbeat", endpoint(task_heartbeat), methods=["POST"]),
        Route("/v1/agent/tasks/{task_id}/result", endpoint(result), methods=["POST"]),
    ]

    return Starlette(routes=routes)


def check_bind_host(host: str) -> str:
    """The address to bind, normalised; ``control_plane_bind_not_loopback`` unless it is a numeric loopback address.

    The loopback rule is :func:`agentrt.net.is_loopback_host` (loose, ``numeric=True``):
    any ``127.0.0.0/8`` or ``::1`` address, brackets optional, never a name (the server
    would resolve it itself) and never ``0.0.0.0``/``::``.  The API key is the only
    protection, so nothing else may be bound.
    """
    if not is_loopback_host(host, numeric=True):
        raise AgentrtError("control_plane_bind_not_loopback", "bind a numeric loopback address")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return str(ipaddress.ip_address(bare))


async def open_store(*, database: str | None = None, redis_url: str | None = None, prefix: str | None = None) -> Store:
    """Open the SQLite store (default) or the Redis one (trio-native; close either with ``aclose``)."""
    if redis_url:
        from ._redis_store import open_redis_store

        try:
            return await open_redis_store(redis_url, prefix=prefix or "agentrt:cp:")
        except AgentrtError as exc:
            raise AgentrtError("control_plane_storage_unavailable", f"cannot reach redis ({exc.code})") from exc
    from ._sqlite_store import SqliteCore

    path = database or os.path.join("var", "agentrt-control-plane.db")

    def make_sqlite() -> SqliteCore:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        return SqliteCore(path)

    try:
        sqlite_core = await trio.to_thread.run_sync(make_sqlite)
    except Exception as exc:
        raise AgentrtError("control_plane_storage_unavailable", f"cannot open {path!r} ({type(exc).__name__})") from exc
    return ThreadedStore(sqlite_core, concurrency=1)


async def serve_control_plane(
    store: Store,
    settings: ControlPlaneSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8100,
    shutdown: trio.Event,
    certfile: str | None = None,
    keyfile: str | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until ``shutdown`` is set; ``task_status.started(base_url)`` once listening.

    With ``certfile``/``keyfile`` (PEM) the API is served over https.

    The maintenance loop (lease reaping every ``maintenance_interval``, and forgetting finished
    tasks past ``retention_seconds`` when set) runs in the same nursery.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve
    from hypercorn.typing import ASGIFramework

    bind_host = check_bind_host(host)
    config = Config()
    config.bind = [f"[{bind_host}]:{port}" if ":" in bind_host else f"{bind_host}:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 2.0
    config.keep_alive_timeout = 30.0
    if certfile is not None:
        # Serve https directly (the tool and the worker then verify against their CA bundle).
        config.certfile = certfile
        config.keyfile = keyfile
    app = build_app(store, settings)

    async def maintenance() -> None:
        while True:
            await trio.sleep(settings.maintenance_interval)
            try:
                await store.reap(settings.max_retries)
                if settings.retention_seconds > 0:
                    # A bounded amount per pass, so a large backlog never stalls the loop.
                    for _ in range(_PURGE_BATCHES):
                        if await store.purge(settings.retention_seconds, _PURGE_BATCH) < _PURGE_BATCH:
                            break
            except Exception as exc:  # storage down: keep serving (requests get 500) and retry later
                log.error("lease maintenance failed: %s", _failure_name(exc))

    async with trio.open_nursery() as nursery:

        async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
            # Starlette is an ASGI app; the two libraries spell the ASGI types apart.
            asgi = cast(ASGIFramework, app)
            await serve(asgi, config, shutdown_trigger=shutdown.wait, task_status=task_status)
            nursery.cancel_scope.cancel()  # the server is done: stop the maintenance loop

        async def bound_shutdown() -> None:
            await shutdown.wait()
            # hypercorn drains within graceful_timeout; never let a stuck connection hold us longer.
            nursery.cancel_scope.deadline = trio.current_time() + config.graceful_timeout + 3

        binds = await nursery.start(run_server)
        nursery.start_soon(maintenance)
        nursery.start_soon(bound_shutdown)
        task_status.started(binds[0])
