"""A thread page's stored turns: long replies in parts (a page per further part), failed turns' messages.

A thread whose agent wrote a 50 MB reply must not cost the server 50 MB (and
its Markdown far more) each time the page is opened.  The thread page asks the
store for every reply cut to :data:`REPLY_PART` characters; a longer one ends
with a link to ``/threads/NAME/replies/CONVERSATION/TURN?offset=N``, which
shows the next part (rendered on its own) with links to the parts before and
after.  The store reads a part without reading the reply whole, so each
request's memory is bounded by the part's size whatever the reply's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from agentrt.errors import AgentrtError
from agentrt.threads import ReplyParts, ThreadHistory

__all__ = ["REPLY_PART", "thread_turns", "failure_messages", "reply_part_route"]

#: Characters of a reply shown per part (the thread page shows the first).
REPLY_PART = 100_000
# Pages of 1000 stored events read to find the messages of failed turns (a bound, not a target).
_MESSAGE_PAGES = 20


async def thread_turns(
    chats: Any, name: str, limit: int | None = None, reply_chars: int = REPLY_PART
) -> list[Mapping[str, Any]]:
    """The thread's turns (the first ``limit``) with each reply cut to ``reply_chars`` (``reply_more`` when it goes on).

    A store that cannot read parts gives its turns whole, as before.
    """
    browser = chats.browser
    if not isinstance(browser, ReplyParts):
        return list(await chats.turns(name, limit))
    return list(await browser.thread_turns(name, limit, reply_chars=reply_chars))


async def failure_messages(store: Any, name: str, turns: list[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """The messages of the thread's failed turns, by ``(conversation_id, turn)``, from its stored events.

    A turn row recorded since the database's schema v8 has its message; for older ones the
    ``turn_failed`` event has it, read only then, and bounded: a very long thread may show some older
    failures by code alone.
    """
    out: dict[tuple[str, int], str] = {
        (t["conversation_id"], t["turn"]): str(t["message"])[:500]
        for t in turns if t.get("outcome") == "failed" and t.get("message")}
    reader = store.thread_events if isinstance(store, ThreadHistory) else None
    if reader is None or not any(t.get("outcome") == "failed" and t.get("code") != "turn_cancelled"
                                 and not t.get("message") for t in turns):
        return out  # the turn rows have them (the store records a failed turn's message)
    current: dict[str, int] = {}
    after = 0
    for _page in range(_MESSAGE_PAGES):
        page, after = await reader(name, after=after, limit=1000)
        if not page:
            break
        for env in page:
            ev = env.get("event") or {}
            kind = ev.get("type")
            if kind == "turn_started" and isinstance(ev.get("turn"), int):
                current[env["source"]] = ev["turn"]
            elif kind == "turn_failed" and env["source"] in current and ev.get("message"):
                out[(env["source"], current[env["source"]])] = str(ev["message"])[:500]
    return out


def reply_part_route(
    chats: Any,
    thread_name: Callable[[Request], str],
    page: Callable[..., Awaitable[Response]],
    ctx: Callable[..., dict[str, Any]],
    not_found: Callable[..., Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """The handler of ``GET /threads/{name}/replies/{conversation}/{turn}?offset=N``."""

    async def reply_part(request: Request) -> Response:
        missing = "There is no such reply in this thread. The thread may have been deleted or renamed."
        try:
            name = thread_name(request)
            turn = int(request.path_params["turn"])
            offset = int(request.query_params.get("offset", "0"))
        except (ValueError, AgentrtError):
            return await not_found(request, detail=missing)
        if not 0 <= offset < 1 << 53 or not 0 <= turn < 1 << 53:  # beyond any reply (and SQLite's integers)
            return await not_found(request, detail=missing)
        browser = chats.browser
        conversation = str(request.path_params["conversation"])
        found = None
        if isinstance(browser, ReplyParts):
            found = await browser.reply_part(name, conversation, turn, offset, REPLY_PART)
        if found is None:
            return await not_found(request, detail=missing)
        text, more = found
        base = f"/threads/{name}/replies/{conversation}/{turn}"
        return await page("reply.html", ctx(
            request, thread=name, part=text, offset=offset, end=offset + len(text),
            previous=f"{base}?offset={max(0, offset - REPLY_PART)}" if offset else None,
            next=f"{base}?offset={offset + len(text)}" if more else None))

    return reply_part
