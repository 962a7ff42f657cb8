"""Recording ``run`` conversations by default, and ``run -c``: continue the latest one.

The database is a plugin's (``agentrt-sqlite``); this module only asks the
thread store for the latest conversation and builds the ``sqlite`` sink's
options, so ``agentrt run`` stays small.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .errors import AgentrtError
from .threads import AsyncClosable, ConversationLog

__all__ = ["Continuation", "find_continuation", "log_options", "open_log_sink"]


@attrs.frozen(kw_only=True)
class Continuation:
    """What ``run -c`` takes from the latest recorded conversation."""

    conversation_id: str
    session_id: str
    agent: str | None = None
    executable: str | None = None
    protocol: str | None = None
    thread: str | None = None


def find_continuation(plugins: Any, env: Mapping[str, str], agent: str | None, configured: Any) -> Continuation:
    """The latest conversation with a native session id (of ``agent`` when given).

    ``configured`` holds the names of the config's agents: the conversation's
    agent is reused only if it is still configured; otherwise its executable
    and dialect are, for a conversation that had no named agent; one whose named
    agent was removed is ``continued_agent_removed`` (its env is gone with it).
    Errors: ``thread_store_unavailable``, ``no_conversation``, ``continued_agent_removed``.
    """
    import trio

    store = plugins.thread_store(env)
    if not isinstance(store, ConversationLog):
        raise AgentrtError("thread_store_unavailable", "-c needs the database plugin (agentrt-sqlite)")

    async def lookup() -> Any:
        try:
            with trio.fail_after(30):
                return await store.latest_conversation(agent)
        finally:
            if isinstance(store, AsyncClosable):
                await store.aclose()

    try:
        row = trio.run(lookup)
    except trio.TooSlowError:
        raise AgentrtError("database_timeout", "the database did not answer in time") from None
    if row is None:
        who = f" of agent {agent!r}" if agent else ""
        raise AgentrtError("no_conversation", f"no recorded conversation{who} with a session to continue")
    if agent is None and row["agent"] and row["agent"] not in configured:
        # Its args and env (an API key, a base URL) went with it: running its executable
        # bare would be another agent under the same name.
        raise AgentrtError(
            "continued_agent_removed",
            f"the latest conversation was with agent {row['agent'][:64]!r}, which is no longer in the config "
            f"file; add it again (agentrt agents add {row['agent'][:64]} ...), or pick an agent: "
            f"agentrt run -a NAME --resume {row['session_id']}",
        )
    reuse_agent = agent or (row["agent"] if row["agent"] in configured else None)
    return Continuation(
        conversation_id=row["id"],
        session_id=row["session_id"],
        agent=reuse_agent,
        executable=None if reuse_agent else row["executable"],
        protocol=None if reuse_agent else row["dialect"],
        thread=row["thread"],
    )


def log_options(
    env: Mapping[str, str], resolved: Any, *, thread: str | None, continues: str | None
) -> dict[str, Any]:
    """The ``sqlite`` sink's options for a conversation of ``resolved`` (a ResolvedAgent)."""
    launch = resolved.launch
    return {
        "env": env, "thread": thread, "dialect": launch.protocol, "executable": launch.executable,
        "model": launch.model, "agent": resolved.name, "continues": continues,
    }


def open_log_sink(plugins: Any, options: Mapping[str, Any]) -> Any:
    """The recorder sink (role ``recorder``) for ``options``, or ``None`` without a database plugin.

    A bad ``AGENTRT_DATABASE_URL`` raises its ``AgentrtError`` here, before
    anything is spawned, rather than failing mid-conversation.
    """
    factory = plugins.sink_for("recorder")
    return None if factory is None else factory(dict(options))
