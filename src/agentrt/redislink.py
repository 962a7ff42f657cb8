"""Trio-native Redis for shared state: one coredis client, its Lua scripts, and stable error codes.

Every store that keeps shared state in Redis (the control plane's tasks, and any other store whose
state changes must be atomic across processes) opens its connection here::

    async with open_redis("redis://127.0.0.1:6379/0") as link:
        claimed = await link.run(CLAIM, keys=[prefix], args=[...])

The client is ``coredis`` used directly under trio (it is built on anyio): no thread per call, and
every command is bounded (connect, read and pool waits).  A state change is one Lua script, run by
digest (``EVALSHA``) and loaded again when the server has forgotten it (after a restart).

Failures keep stable codes: ``redis_unavailable`` (cannot connect, connection lost, timed out, the
link closed), ``redis_auth_failed`` (credentials missing or refused), ``redis_handshake_refused`` (a
server older than Redis 6), ``redis_url_invalid`` (a URL the client cannot use) and
``redis_client_missing`` (the ``coredis`` package is not installed).  A script's own
``redis.error_reply('reason')`` arrives as
:class:`RedisScriptError` with that reason, for the store to map onto its own exceptions.  Details
never carry the URL (it may hold a password).

A command that meets a lost connection is not replayed: a replayed state change could apply twice.
The next command opens a fresh connection.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

import trio

from .errors import AgentrtError

try:
    import coredis
    import coredis.exceptions
    from coredis.retry import NoRetryPolicy
except ImportError as _missing:  # pragma: no cover - exercised only without the package
    raise AgentrtError("redis_client_missing", "Redis support needs the coredis package: pip install coredis") from (
        _missing
    )

__all__ = [
    "LuaScript",
    "RedisLink",
    "RedisScriptError",
    "REDIS_UNAVAILABLE",
    "connect_redis",
    "open_redis",
]

#: The code of every "Redis cannot be reached or answered too late" error.
REDIS_UNAVAILABLE = "redis_unavailable"
T = TypeVar("T")

# Transport failures: the request may or may not have reached the server, so none is retried.
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    coredis.exceptions.ConnectionError,
    TimeoutError,
    OSError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)


class RedisScriptError(Exception):
    """A Lua script answered with ``redis.error_reply(reason)`` (or a command inside it failed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LuaScript:
    """A Lua script's source and digest, defined once at import and run through :meth:`RedisLink.run`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()


def _unavailable(exc: BaseException) -> AgentrtError:
    return AgentrtError(REDIS_UNAVAILABLE, f"redis did not answer ({type(exc).__name__})")


class RedisLink:
    """An open coredis client: run Lua scripts and commands with errors mapped to stable codes.

    Build it with :func:`open_redis` (an async context manager, tied to the caller's task) or
    :func:`connect_redis` (awaitable; the connections live until :meth:`aclose` or the end of the
    trio run).
    """

    def __init__(self, client: coredis.Redis[bytes]) -> None:
        self.client = client
        self._scripts: dict[str, coredis.commands.Script[bytes]] = {}
        self._closing = trio.Event()
        self._closed = trio.Event()
        self._failure: BaseException | None = None

    @property
    def closed(self) -> bool:
        """Whether the link was closed (or its connections ended on their own)."""
        return self._closed.is_set()

    async def run(self, script: LuaScript, *, keys: Sequence[str], args: Sequence[str | int | float]) -> Any:
        """Run ``script`` atomically on the server (``EVALSHA``, loading it again when forgotten).

        Raises :class:`RedisScriptError` for the script's error replies and
        ``AgentrtError('redis_unavailable')`` when the server cannot be reached.
        """
        registered = self._scripts.get(script.sha)
        if registered is None:
            registered = self._scripts[script.sha] = self.client.register_script(script.source)
        return await self.call(lambda: registered(keys=list(keys), args=list(args)))

    async def call(self, command: Callable[[], Awaitable[T]]) -> T:
        """Await ``command()`` (a coredis command on :attr:`client`) with the same error mapping as :meth:`run`."""
        if self._closed.is_set():
            raise AgentrtError(REDIS_UNAVAILABLE, "the redis link is closed")
        try:
            return await command()
        except (coredis.exceptions.AuthenticationError, coredis.exceptions.AuthorizationError) as exc:
            raise AgentrtError("redis_auth_failed", f"redis refused the credentials ({type(exc).__name__})") from None
        except coredis.exceptions.ResponseError as exc:
            raise RedisScriptError(str(exc).strip()) from None
        except _TRANSPORT_ERRORS as exc:
            raise _unavailable(exc) from exc

    async def ping(self) -> None:
        """Check that the server answers (``redis_unavailable`` otherwise)."""
        await self.call(self.client.ping)

    async def _serve(self, started: trio.Event) -> None:
        # The client's connections are tasks of its pool's task group: they live inside this block.
        try:
            async with self.client:
                started.set()
                await self._closing.wait()
        except Exception as exc:  # a system task must not raise: remember why, callers see it
            self._failure = exc
        finally:
            self._closed.set()
            started.set()

    async def _ready(self, started: trio.Event, connect_timeout: float) -> None:
        # Entering the client is local work; the bound only guards against a bug stalling it.
        with trio.fail_after(connect_timeout + 5):
            await started.wait()
        if self._closed.is_set():
            raise _unavailable(self._failure or RuntimeError("closed"))
        try:
            await self.ping()
        except RedisScriptError:
            # The handshake itself was refused: a server older than Redis 6 does not know HELLO (RESP3).
            raise AgentrtError("redis_handshake_refused", "redis refused the handshake (Redis 6 or later)") from None

    async def aclose(self) -> None:
        """Close every connection (idempotent); returns once they are closed."""
        self._closing.set()
        await self._closed.wait()


def _client(url: str, connect_timeout: float, command_timeout: float, max_connections: int) -> coredis.Redis[bytes]:
    for name, value in (("connect_timeout", connect_timeout), ("command_timeout", command_timeout)):
        if not (math.isfinite(value) and value > 0):
            raise AgentrtError("redis_timeout_invalid", f"{name} must be a positive number of seconds")
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise AgentrtError("redis_url_invalid", "a redis URL starts with redis://, rediss:// or unix://")
    try:
        return coredis.Redis.from_url(
            url,
            connect_timeout=connect_timeout,
            stream_timeout=command_timeout,
            pool_timeout=command_timeout,
            max_connections=max_connections,
            retry_policy=NoRetryPolicy(),
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise AgentrtError("redis_url_invalid", f"not a usable redis URL ({type(exc).__name__})") from None


@asynccontextmanager
async def open_redis(
    url: str, *, connect_timeout: float = 5.0, command_timeout: float = 10.0, max_connections: int = 32
) -> AsyncIterator[RedisLink]:
    """Connect to ``url`` (``redis://``, ``rediss://`` or ``unix://``) for the duration of the block.

    The server must answer a ``PING`` within ``connect_timeout`` seconds; every later command is
    bounded by ``command_timeout`` seconds.
    """
    link = RedisLink(_client(url, connect_timeout, command_timeout, max_connections))
    started = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link._serve, started)
            try:
                await link._ready(started, connect_timeout)
                yield link
            finally:
                link._closing.set()
    except BaseExceptionGroup as group:
        # _serve never raises, so a lone exception is the caller's (or the connect's): raise it as is.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def connect_redis(
    url: str, *, connect_timeout: float = 5.0, command_timeout: float = 10.0, max_connections: int = 32
) -> RedisLink:
    """Like :func:`open_redis`, for owners closed with :meth:`RedisLink.aclose` rather than by a block.

    The connections live in a trio system task, so the link may outlive the task that opened it (a
    server's store is opened by its setup code and used by every request handler); they end with
    :meth:`RedisLink.aclose` or with the trio run, whichever comes first.
    """
    link = RedisLink(_client(url, connect_timeout, command_timeout, max_connections))
    started = trio.Event()
    trio.lowlevel.spawn_system_task(link._serve, started)
    try:
        await link._ready(started, connect_timeout)
    except BaseException:
        with trio.CancelScope(shield=True):
            await link.aclose()
        raise
    return link
