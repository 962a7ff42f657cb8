"""Chat threads in the browser: one live agent process per open thread, turns, Stop, resume.

A thread is opened (its agent CLI spawned, with ``--resume <session id>``
when the thread store remembers one) at its first message after the server
starts, and stays live until the thread is deleted or the server stops.
Every conversation has two sinks: the database's (the thread's history and
native session id) and a :class:`WebSink` that turns event batches into
browser messages on the hub (``coalesce`` policy: a slow page never slows the
agent).

What reaches the browser (:mod:`agentrt_web._websink`) is a projection of the
events, never the events themselves: tool steps carry their bounded label
(``ToolUse.summary``), not their input; diagnostics carry their code; raw
protocol objects never leave the server.  Finished replies are rendered to
safe HTML on the server.
"""

from __future__ import annotations

import re
import secrets
import sys
import time
from collections.abc import Mapping
from typing import Any

import trio

from agentrt.errors import AgentrtError
from agentrt.events import TurnCompleted, TurnFailed
from agentrt.sinks import FlushableSink
from agentrt.threads import ThreadBrowser, ThreadRecord, ThreadRenamer, ThreadStore

from ._agents import ThreadAgent, WebAgents
from ._chat_open import thread_policy, thread_sinks
from ._hub import Hub, sse_frame
from ._live import LiveThread
from ._render import title_of
from ._websink import WebSink

__all__ = ["ChatManager", "valid_thread_name"]

#: Names the server makes up (``web-<date>-<time>-<hex>``), and alike.
_GENERATED = re.compile(r"[a-z]+-\d{8}-\d{6}-[0-9a-f]+")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_PROMPT = 100_000
_OPEN_TIMEOUT = 30.0
_CLOSE_TIMEOUT = 15.0


def valid_thread_name(name: str) -> bool:
    """Names the web UI accepts in URLs: 1-64 of ``[A-Za-z0-9._-]``."""
    return 0 < len(name) <= 64 and all(c in _NAME_CHARS for c in name) and name not in (".", "..")


class ChatManager:
    """Every open thread of this server, inside the server's nursery."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        plugins: Any,
        env: Mapping[str, str],
        hub: Hub,
        store: ThreadStore,
        launch: Any,
        term_grace: float | None = None,
        agent: str | None = None,
        approval: Mapping[str, Any] | None = None,
        permissions: Any = None,
        agents: WebAgents | None = None,
        added_sinks: tuple[str, ...] = (),
    ) -> None:
        self._nursery = nursery
        #: ``agentrt web --sink NAME``'s role-less sinks: each thread's conversation gets one of each.
        self.added_sinks = added_sinks
        self.plugins = plugins
        self.env = dict(env)
        self.hub = hub
        self.store = store
        #: The store's listing, history and deletion, when it offers them.
        self.browser: ThreadBrowser | None = store if isinstance(store, ThreadBrowser) else None
        self.launch = launch
        #: The default agent's name (``agentrt web -a NAME``), recorded with each conversation.
        self.agent = agent
        #: The agents a thread can talk to (the picker's); the default is ``launch`` / ``agent``.
        self.agents = agents if agents is not None else WebAgents(
            ThreadAgent(name=agent, launch=launch, permissions=permissions))
        self.term_grace = term_grace
        from ._approvals import WebApprovals

        #: Tool-approval questions open on the pages; ``approval`` holds the command's options.
        self.approvals = WebApprovals(hub)
        self._approval = dict(approval or {})
        self._live: dict[str, LiveThread] = {}
        self._opening: dict[str, trio.Lock] = {}
        self._titles: dict[str, str] = {}

    # -- queries -------------------------------------------------------
    def live(self, name: str) -> LiveThread | None:
        """The open thread ``name``, if any."""
        return self._live.get(name)

    async def list_threads(self, query: str = "") -> list[dict[str, Any]]:
        """Threads for the sidebar, most recent first, filtered by ``query`` (title or name)."""
        if self.browser is None:
            return []
        rows = await self.browser.list_threads()
        out: list[dict[str, Any]] = []
        q = query.strip().lower()
        for row in rows[:500]:
            name = row.record.name
            if not valid_thread_name(name):
                continue
            title = await self._title(name)
            if q and q not in title.lower() and q not in name.lower():
                continue
            out.append({"name": name, "title": title, "updated_at": row.updated_at, "turns": row.turns,
                        "live": name in self._live})
        return out

    async def _title(self, name: str) -> str:
        # A name someone chose (a rename, ``agentrt chat --thread``) is the title; a generated
        # one gives way to the first line of the first message.
        if not _GENERATED.fullmatch(name):
            return name
        # A title never changes once the first turn exists: remember it (one query per thread, once).
        cached = self._titles.get(name)
        if cached is not None:
            return cached
        from ._replies import thread_turns

        turns = await thread_turns(self, name, 1, reply_chars=0)  # the prompt only: never a long reply
        if not turns:
            return name
        title = self._titles[name] = title_of(turns[0]["prompt"], name)
        return title

    async def turns(self, name: str, limit: int | None = None) -> list[Mapping[str, Any]]:
        """The thread's stored turns, oldest first."""
        if self.browser is None:
            return []
        return list(await self.browser.thread_turns(name, limit))

    async def settle(self, name: str) -> None:
        """Wait (bounded) until the database has every event of the thread handed over so far.

        A page drawn from the database right after a turn ended then shows that turn.
        """
        live = self._live.get(name)
        sink = live.db_sink if live is not None else None
        if isinstance(sink, FlushableSink):
            with trio.move_on_after(2.0):
                try:
                    await sink.flush()
                except AgentrtError:
                    pass

    def agent_name(self) -> str:
        """What the header calls the default agent: its configured name, else its executable's."""
        return self.agents.default.label

    async def thread_agent(self, name: str) -> str | None:
        """The configured agent thread ``name`` talks to (``None``: the default)."""
        live = self._live.get(name)
        if live is not None and live.agent is not None:
            return live.agent.name
        record = await self.store.get_thread(name)
        return record.agent if record is not None else None

    async def model(self, name: str | None) -> str:
        """The model of thread ``name`` as last reported, else the configured one ("" if unknown)."""
        live = self._live.get(name) if name else None
        if live is not None and live.conv is not None and live.conv.model:
            return str(live.conv.model)
        record = await self.store.get_thread(name) if name else None
        return str((record.model if record is not None else None) or self.launch.model or "")

    async def rename(self, old: str, new: str) -> None:
        """Give thread ``old`` the name ``new`` (its history and session go with it).

        Its agent process is stopped first (the next message resumes the session under the new
        name); ``turn_in_progress`` while a turn runs.
        """
        if not valid_thread_name(new):
            raise AgentrtError("invalid_thread_name", "thread names are 1-64 of [A-Za-z0-9._-]")
        renamer = self.store.rename_thread if isinstance(self.store, ThreadRenamer) else None
        if renamer is None:
            raise AgentrtError("thread_rename_unsupported", "the thread store cannot rename threads")
        live = self._live.get(old)
        if live is not None:
            if live.busy:
                raise AgentrtError("turn_in_progress", "wait for the turn to end (or stop it) first")
            await self._close(live)
        if old != new and not await renamer(old, new):
            raise AgentrtError("unknown_thread", f"no thread named {old!r}")
        self._titles.pop(old, None)

    async def exists(self, name: str) -> bool:
        """Whether the store knows the thread (or it is open here)."""
        return name in self._live or await self.store.get_thread(name) is not None

    # -- actions ---------------------------------------------------------
    async def create(self, agent: str | None = None) -> str:
        """A new, empty thread talking to configured agent ``agent`` (``None``: the default); returns its name.

        ``unknown_agent`` (or the agent's ``config_invalid``) when that agent cannot run.
        """
        chosen = self.agents.get(agent)
        launch = chosen.launch
        name = f"web-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        await self.store.save_thread(ThreadRecord(
            name=name, dialect=launch.protocol, executable=launch.executable, model=launch.model, agent=chosen.name))
        return name

    async def delete(self, name: str) -> bool:
        """Stop the thread's agent (if open) and forget the thread."""
        live = self._live.get(name)
        if live is not None:
            await self._close(live)
        if self.browser is None:
            raise AgentrtError("thread_delete_unsupported", "the thread store cannot delete threads")
        ok = await self.browser.delete_thread(name)
        self._titles.pop(name, None)
        return ok

    async def send(self, name: str, text: str) -> str:
        """Start a turn on ``name`` (opening the thread first); returns the turn's key once it is under way.

        See :class:`~agentrt_web._live.LiveThread` for the turn's key and for a Stop still under way.
        """
        if not text.strip():
            raise AgentrtError("empty_prompt", "the message is empty")
        if len(text) > MAX_PROMPT:
            raise AgentrtError("prompt_too_long", f"messages are limited to {MAX_PROMPT} characters")
        live = await self.open(name)
        return await live.start(text, self._nursery, self._turn)

    async def cancel(self, name: str, key: str | None = None) -> bool:
        """Stop the turn in flight (the thread stays open); ``False`` if there is none to stop.

        With ``key`` only the turn of that key (what :meth:`send` returned); Stops of one turn coalesce.
        """
        live = self._live.get(name)
        return False if live is None else await live.stop(key, self._nursery)

    async def open(self, name: str) -> LiveThread:
        """The live thread ``name``, spawning its agent (resuming its session) if needed."""
        live = self._live.get(name)
        if live is not None and live.conv is not None:
            return live
        lock = self._opening.setdefault(name, trio.Lock())
        async with lock:
            live = self._live.get(name)
            if live is not None and live.conv is not None:
                return live
            if self.browser is not None:
                record, _diag = await self.browser.check_thread(name)
            else:
                record = await self.store.get_thread(name)
            if record is None:
                raise AgentrtError("unknown_thread", f"no thread named {name!r}")
            live = LiveThread(name=name, sink=WebSink(self.hub, name, self._nursery),
                         agent=self.agents.get(record.agent))
            with trio.fail_after(_OPEN_TIMEOUT):
                await self._nursery.start(self._host, live, record.session_id)
            self._live[name] = live
            return live

    async def _host(self, live: LiveThread, resume: str | None, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from agentrt import open_conversation

        agent = live.agent or self.agents.default
        launch = agent.launch
        sinks = thread_sinks(live, agent, plugins=self.plugins, env=self.env, added_sinks=self.added_sinks)
        started = False
        policy = thread_policy(live.name, agent.permissions, options=self._approval, approvals=self.approvals,
                               store=self.store)
        try:
            async with open_conversation(launch, plugins=self.plugins, resume=resume, sinks=sinks,
                                         parent_env=self.env, term_grace=self.term_grace,
                                         permission_policy=policy, conversation_id=policy.conversation_id,
                                         first_output_timeout=agent.first_output_timeout) as conv:
                live.conv = conv
                started = True
                task_status.started()
                await live.closing.wait()
        except AgentrtError:
            if not started:
                raise
        except Exception as exc:  # a broken thread must not take the server down
            if not started:
                raise
            print(f"agentrt web: thread {live.name!r} ended: {type(exc).__name__}", file=sys.stderr)
        finally:
            live.conv = None
            if self._live.get(live.name) is live:
                del self._live[live.name]
            live.closed.set()

    async def _turn(self, live: LiveThread, text: str, started: trio.Event) -> None:
        conv = live.conv
        try:
            if conv is None:
                raise AgentrtError("session_exited", "the thread is closed")
            stream = conv.send(text)
            first = True
            async for event in stream:
                if first:
                    started.set()
                    first = False
                if isinstance(event, (TurnCompleted, TurnFailed)):
                    live.ended()  # the next message may go now; saving the thread can trail
            if conv.session_id:
                launch = (live.agent or self.agents.default).launch
                await self.store.save_thread(ThreadRecord(
                    name=live.name, dialect=launch.protocol, executable=launch.executable,
                    model=conv.model, session_id=conv.session_id, agent=live.agent.name if live.agent else None))
        except AgentrtError as exc:
            # Failures before the turn reached the agent: show them as the turn's error bubble.
            self.hub.publish(live.sink.topic, sse_frame({"t": time.time(), "m": [
                {"k": "failed", "turn": None, "html": "", "usage": None, "duration": None,
                 "code": exc.code, "message": exc.detail[:500]}]}))
        finally:
            live.ended()
            started.set()

    async def _close(self, live: LiveThread) -> None:
        live.closing.set()
        with trio.move_on_after(_CLOSE_TIMEOUT):
            await live.closed.wait()

    async def aclose(self) -> None:
        """Stop every open thread's agent (bounded)."""
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as n:
                for live in list(self._live.values()):
                    n.start_soon(self._close, live)
