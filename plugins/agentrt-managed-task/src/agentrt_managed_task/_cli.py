"""``agentrt control-plane`` and ``agentrt worker`` (click commands; heavy imports inside)."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click

from agentrt import AgentrtError


def _fail(exc: AgentrtError) -> None:
    click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
    sys.exit(2)


def _run(main: Callable[[Any], Awaitable[None]], bind: str | None = None) -> None:
    """Run ``main(shutdown_event)`` under trio; SIGINT/SIGTERM set the event (``bind``: the address served)."""
    import logging

    import trio

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    async def root() -> None:
        shutdown = trio.Event()
        async with trio.open_nursery() as nursery:

            async def signals() -> None:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
                    async for _ in received:
                        shutdown.set()
                        return

            nursery.start_soon(signals)
            await main(shutdown)
            nursery.cancel_scope.cancel()

    try:
        trio.run(root)
    except (AgentrtError, OSError, BaseExceptionGroup) as exc:
        # Background tasks report through nurseries: find the one error that says why.
        _fail(_reason(exc, bind))


def _reason(exc: BaseException, bind: str | None) -> AgentrtError:
    """The error to print for ``exc``: its lone AgentrtError, or a bind failure; anything else is a bug."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, KeyboardInterrupt)]
        ours = [e for e in _leaves(exc) if isinstance(e, AgentrtError)]
        if ours:
            return ours[0]
        if len(inner) != 1:
            raise exc
        exc = inner[0]
    if isinstance(exc, AgentrtError):
        return exc
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return AgentrtError("address_in_use", f"cannot listen on {bind}: the port is already in use")
    if isinstance(exc, OSError) and exc.errno == errno.EADDRNOTAVAIL:
        return AgentrtError("address_not_available", f"cannot listen on {bind}: no such address on this machine")
    raise exc


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def _ready(kind: str, **fields: Any) -> None:
    # One JSON line on stdout so supervisors (and tests using --port 0) learn the address.
    sys.stdout.write(json.dumps({"type": kind, **fields}) + "\n")
    sys.stdout.flush()


@click.command("control-plane")
@click.option("--host", default="127.0.0.1", show_default=True, help="Numeric loopback address to bind.")
@click.option("--port", default=8100, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@click.option("--database", type=click.Path(dir_okay=False), help="SQLite file (default var/agentrt-control-plane.db).")
@click.option("--redis", "redis_url", help="Use Redis storage at this URL instead of SQLite.")
@click.option("--redis-prefix", default="agentrt:cp:", show_default=True, help="Key prefix in Redis.")
@click.option("--api-key-file", type=click.Path(dir_okay=False), help="Read the bearer key from this file.")
@click.option("--certfile", type=click.Path(dir_okay=False, exists=True), help="Serve https: PEM certificate chain.")
@click.option("--keyfile", type=click.Path(dir_okay=False, exists=True), help="Serve https: PEM private key.")
def control_plane(
    host: str,
    port: int,
    database: str | None,
    redis_url: str | None,
    redis_prefix: str,
    api_key_file: str | None,
    certfile: str | None,
    keyfile: str | None,
) -> None:
    """Serve the task API: submissions, status, and the worker API (leases, results).

    The bearer key comes from AGENTRT_CONTROL_PLANE_API_KEY (or _FILE, or --api-key-file); without
    one it refuses to start (control_plane_api_key_missing).  AWP_TASK_LEASE_SECONDS (60) and
    AWP_TASK_MAX_RETRIES (3) tune leases.
    """
    if database and redis_url:
        _fail(AgentrtError("conflicting_storage_options", "give --database or --redis, not both"))
    if (certfile is None) != (keyfile is None):
        _fail(AgentrtError("incomplete_tls_options", "give both --certfile and --keyfile"))
    from ._server import ControlPlaneSettings, check_bind_host, load_api_key

    try:
        check_bind_host(host)
        settings = ControlPlaneSettings.from_env(os.environ, api_key=load_api_key(os.environ, api_key_file))
    except AgentrtError as exc:
        _fail(exc)
    if settings.api_key is None:
        # Without a key every request would be refused (503): say so now instead of serving nothing.
        _fail(AgentrtError(
            "control_plane_api_key_missing",
            "set AGENTRT_CONTROL_PLANE_API_KEY (or AGENTRT_CONTROL_PLANE_API_KEY_FILE, or --api-key-file)",
        ))

    async def main(shutdown: Any) -> None:
        import trio

        from ._server import open_store, serve_control_plane

        store = await open_store(database=database, redis_url=redis_url, prefix=redis_prefix)
        try:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(
                    lambda task_status: serve_control_plane(
                        store,
                        settings,
                        host=host,
                        port=port,
                        shutdown=shutdown,
                        certfile=certfile,
                        keyfile=keyfile,
                        task_status=task_status,
                    )
                )
                _ready("control_plane_ready", url=url, storage="redis" if redis_url else "sqlite")
        finally:
            with trio.CancelScope(shield=True):
                await store.aclose()

    _run(main, bind=f"[{host}]:{port}" if ":" in host else f"{host}:{port}")


@click.command("worker")
@click.option("--control-plane", "control_plane_url", required=True, help="Origin of the control plane.")
@click.option("--allow", "allow", multiple=True, help="Executable basename to allow (repeatable).")
@click.option("--slots", default=2, show_default=True, type=click.IntRange(1, 64), help="Tasks run at once.")
@click.option("--work-dir", type=click.Path(file_okay=False), help="Run dirs and the result outbox.")
@click.option("--trusted-path", default=None, help="PATH used to resolve --allow and given to commands.")
@click.option(
    "--poll-interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.01, 60),
    help="Seconds between claims when idle.",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    default=3600.0,
    show_default=True,
    type=click.FloatRange(0.1, 86400),
    help="Per-command time limit (s).",
)
@click.option(
    "--max-output-bytes",
    default=1024 * 1024,
    show_default=True,
    type=click.IntRange(1, 1024 * 1024),
    help="Output kept per command.",
)
@click.option("--agent-id", default=None, help="Worker id (default host-pid-random).")
@click.option("--ca-file", type=click.Path(dir_okay=False, exists=True), help="CA bundle for an https control plane.")
@click.option("--pass-env", "pass_env", multiple=True, help="Environment variable to pass to commands (repeatable).")
@click.option(
    "--retry-attempts",
    default=5,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Delivery attempts before a queued result waits for the replay loop.",
)
@click.option(
    "--retry-initial", default=1.0, show_default=True, type=click.FloatRange(0.001, 60), help="First retry backoff (s)."
)
@click.option(
    "--retry-max",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0.001, 3600),
    help="Longest retry backoff (s).",
)
@click.option(
    "--replay-interval",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0.01, 3600),
    help="Seconds between outbox replays.",
)
def worker(
    control_plane_url: str, allow: tuple[str, ...], work_dir: str | None, agent_id: str | None, **options: Any
) -> None:
    """Run allow-listed commands for the control plane (trusted execution, not a sandbox).

    Needs AGENTRT_TRUSTED_TASK_EXECUTION_OPT_IN=1 and the key in AWP_CONTROL_PLANE_API_KEY.
    """
    from ._worker import WorkerSettings

    if work_dir is None:
        import platformdirs

        work_dir = str(platformdirs.user_state_path("agentrt") / "worker")
    if agent_id is not None:
        options["agent_id"] = agent_id
    try:
        settings = WorkerSettings.from_env(
            os.environ, control_plane=control_plane_url, allow=list(allow), work_dir=work_dir, **options
        )
    except AgentrtError as exc:
        _fail(exc)

    async def main(shutdown: Any) -> None:
        import trio

        from ._worker import Worker

        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: Worker(settings).run(shutdown=shutdown, task_status=task_status))
            _ready("worker_ready", agent_id=settings.agent_id)

    _run(main)
