"""Opening a conversation: :func:`open_conversation` (re-exported by :mod:`agentrt._conversation`).

What it resolves before the first spawn (the launch contract from the
environment, the dialect and permission policy from the plugins, the
first-output bound), and the one nursery a conversation's background tasks
run in: the agent is spawned on entry and stopped, with the sinks flushed, on
leaving.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal

import trio

from ._exception_groups import collapse_single_group
from ._ids import new_id
from ._launch import LaunchSpec, is_valid_session_id
from ._protocol_mismatch import first_output_timeout as _first_output_from_env
from .dialect import Dialect
from .errors import AgentrtError
from .permissions import PermissionPolicy

if TYPE_CHECKING:
    from ._conversation import Conversation
    from ._plugins import Plugins
    from .sinks import Sink

__all__ = ["open_conversation"]


@asynccontextmanager
async def open_conversation(
    launch: LaunchSpec | None = None,
    *,
    plugins: Plugins | None = None,
    resume: str | None = None,
    sinks: Sequence[Sink] = (),
    cwd: str | None = None,
    parent_env: Mapping[str, str] | None = None,
    conversation_id: str | None = None,
    permission_policy: PermissionPolicy | None = None,
    dialect: Dialect | None = None,
    term_grace: float | None = None,
    first_output_timeout: float | Literal["env"] | None = "env",
) -> AsyncIterator[Conversation]:
    """Open a conversation with the agent CLI that ``launch`` names.

    ``launch`` defaults to the launch contract read from the environment
    (``AWP_AGENT_CLI_*``).  The process starts here, so launch and spawn
    errors (``spawn_failed``) are raised on entry.  If the process exits, the
    next send starts a new one, resuming the native session when the agent
    reported a valid id.  ``term_grace`` overrides how long a stopping agent
    has between SIGTERM and SIGKILL.  ``first_output_timeout`` bounds how long
    a new process has after the prompt to write a line its dialect recognises
    before the turn fails ``protocol_mismatch`` (``None``: no bound; by
    default ``AGENTRT_FIRST_OUTPUT_TIMEOUT`` of ``parent_env``, else 30 s).  Leaving the block (normally, by
    exception or by cancellation of the caller's scope) stops the agent and
    flushes the sinks, shielded and bounded.

    Example::

        async with open_conversation(LaunchSpec(executable="/usr/local/bin/my-agent")) as conv:
            async for event in conv.send("hello"):
                print(event)
    """
    env = dict(os.environ) if parent_env is None else dict(parent_env)
    if launch is None:
        launch = LaunchSpec.from_env(env)
    if resume is not None and not is_valid_session_id(resume):
        raise AgentrtError("invalid_resume_session_id", "resume id must match [A-Za-z0-9._:-]{1,256}")
    first_output = _first_output_from_env(env) if first_output_timeout == "env" else first_output_timeout
    if plugins is None and (dialect is None or permission_policy is None):
        from ._plugins import get_plugins

        plugins = get_plugins()
    if dialect is None:
        assert plugins is not None
        dialect = plugins.dialect(launch.protocol)
    if permission_policy is None:
        assert plugins is not None
        permission_policy = plugins.permission_policy()
    # The nursery only runs our background tasks: an error from the body or from
    # spawning is the caller's one exception, not a group to unpack.
    from ._conversation import Conversation  # here: that module re-exports this function

    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            conv = Conversation(
                nursery=nursery,
                launch=launch,
                dialect=dialect,
                permission_policy=permission_policy,
                cwd=cwd,
                parent_env=env,
                conversation_id=conversation_id or new_id(),
                resume=resume,
                term_grace=term_grace,
                first_output=first_output,
            )
            for sink in sinks:
                await conv.attach(sink)
            try:
                # Spawn now, not at the first send: output before the first input is
                # then visible as such, and a spawn failure surfaces here.
                await conv._engine.ensure(resume)
                yield conv
            finally:
                await conv._aclose()
                nursery.cancel_scope.cancel()
