"""What a web thread's conversation is opened with: its sinks and its tool-approval policy.

:func:`thread_sinks` gives the thread's :class:`~agentrt_web._websink.WebSink`,
one of each ``agentrt web --sink NAME`` sink and the database's recorder (kept
as the thread's ``db_sink``); :func:`thread_policy` asks on the thread's pages
and records each answer in the database when the store keeps approvals.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentrt.errors import AgentrtError
from agentrt.threads import ApprovalLog, ThreadStore

from ._agents import ThreadAgent
from ._live import LiveThread

if TYPE_CHECKING:
    from ._approvals import WebApprovals

__all__ = ["thread_policy", "thread_sinks"]


def thread_sinks(
    live: LiveThread, agent: ThreadAgent, *, plugins: Any, env: Mapping[str, str], added_sinks: tuple[str, ...]
) -> list[Any]:
    """The sinks of thread ``live`` talking to ``agent``; sets ``live.db_sink`` when a recorder plugin exists.

    Raises the recorder's own :class:`~agentrt.errors.AgentrtError`, and
    ``database_sink_failed`` (naming the exception's type only) for anything
    else it raises.
    """
    sinks: list[Any] = [live.sink]
    launch = agent.launch
    factory = plugins.sink_for("recorder")
    options = {"env": env, "thread": live.name, "dialect": launch.protocol,
               "executable": launch.executable, "model": launch.model, "agent": agent.name}
    if added_sinks:
        from agentrt.sinks import open_added_sinks

        sinks.extend(open_added_sinks(plugins, added_sinks, options))
    if factory is not None:
        try:
            live.db_sink = factory(dict(options))
            sinks.append(live.db_sink)
        except AgentrtError:
            raise
        except Exception as exc:  # a broken database plugin: say so with a code, not a 500
            raise AgentrtError("database_sink_failed", f"the database sink could not start: "
                               f"{type(exc).__name__}") from exc
    return sinks


def thread_policy(
    name: str, permissions: Any, *, options: Mapping[str, Any], approvals: WebApprovals, store: ThreadStore
) -> Any:
    """Thread ``name``'s tool-approval policy: asks on its pages, records in the database.

    ``options`` holds the command's approval options (``permission_mode``,
    ``allow_tools``, ``deny_tools``, ``ask_timeout``); ``permissions`` is the
    agent's configured rules.  Each call gets a fresh conversation id.
    """
    import uuid

    from agentrt.approval import build_approval_policy

    return build_approval_policy(
        default_mode="ask", permission_mode=options.get("permission_mode"),
        allow_tools=options.get("allow_tools", ()), deny_tools=options.get("deny_tools", ()), config=permissions,
        asker=approvals.asker(name), ask_timeout=options.get("ask_timeout", 50.0),
        recorder=store.record_approval if isinstance(store, ApprovalLog) else None,
        conversation_id=str(uuid.uuid4()), thread=name,
        notify=lambda note: print(f"agentrt web: thread {name!r}: {note}", file=sys.stderr),
    )
