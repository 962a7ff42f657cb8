"""How an agent-side process that could not start says so, in its outer dialect.

``agentrt agent`` and ``agentrt bridge`` print one stream-json-like
``startup_error`` result line when they cannot start.  A JSON-RPC dialect
(ACP) cannot carry that line: its client waits for the answer to its own
request, and stdout must carry JSON-RPC only.  When the dialect's agent codec
offers ``startup_error_reply(obj, code, message)``, the process instead reads
its input until the client's first request (bounded), answers it with that
JSON-RPC error, and only then exits (a
:class:`~agentrt.dialect.RepliesToStartupError` codec).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import trio

__all__ = ["dialect_in_argv", "report_startup_error"]

#: How long a failed process waits for its client's first request before exiting.
STARTUP_ANSWER_BOUND = 30.0


def dialect_in_argv(argv: Sequence[str], flag: str) -> str | None:
    """The value after ``flag`` (``--to``, ``--dialect``) in raw argv, also when argv did not parse."""
    args = list(argv)
    for n, arg in enumerate(args[:-1]):
        if arg == flag:
            return args[n + 1]
    return None


def _reply_function(dialect: str | None, plugins: Any) -> Any:
    if not dialect:
        return None
    try:
        if plugins is None:
            from ._plugins import get_plugins

            plugins = get_plugins()
        codec = plugins.dialect(dialect).agent_codec()
    except Exception:  # an unknown dialect (perhaps the very startup error): the plain line
        return None
    from .dialect import RepliesToStartupError

    return codec.startup_error_reply if isinstance(codec, RepliesToStartupError) else None


async def report_startup_error(
    dialect: str | None, source: Any, sink: Any, code: str, message: str, *, line: bytes, plugins: Any = None
) -> None:
    """Tell the client the process could not start: ``line`` as is, or a JSON-RPC error to its first request.

    ``source``/``sink`` are the process's stdin and stdout byte streams.  The
    JSON-RPC wait ends at the first request, end of input or
    :data:`STARTUP_ANSWER_BOUND` seconds, whichever comes first.
    """
    reply = _reply_function(dialect, plugins)
    if reply is None:
        await sink.send_all(line)
        return
    from ._exit_reason import mask_text
    from .agent._io import Oversized, read_lines

    with trio.move_on_after(STARTUP_ANSWER_BOUND):
        async for raw in read_lines(source):
            if isinstance(raw, Oversized) or not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            answer = reply(obj, code, mask_text(message))
            if answer is not None:
                await sink.send_all(orjson.dumps(answer) + b"\n")
                return
