"""The starlette application: pages, the JSON API, the event streams, static files.

Pages are rendered on the server with Jinja2 (autoescaping on); the page
scripts live in ``static/`` (the CSP forbids inline script) and talk to the
``/api/`` routes with the session's CSRF token in a header.  State-changing
routes are POST only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs
import jinja2
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentrt.errors import AgentrtError

from ._bots import ACTIONS, BotManager, public_bot, qr_url_of
from ._chat import ChatManager, valid_thread_name
from ._hub import Hub
from ._render import qr_svg, relative_time, render_markdown, until
from ._replies import failure_messages, reply_part_route, thread_turns
from ._security import SecurityMiddleware
from ._sessions import Sessions, Throttle
from ._sse import SSEResponse
from ._steps import stored_steps, with_steps
from ._websink import step_text

__all__ = ["WebState", "build_app"]

_HERE = Path(__file__).parent
_TIMELINE_PAGE = 50
_STATUS = {
    "unknown_thread": 404, "unknown_bot": 404, "turn_in_progress": 409, "empty_prompt": 400,
    "prompt_too_long": 413, "invalid_thread_name": 400, "unknown_action": 400, "bad_request": 400,
    "supervisor_unavailable": 409, "bots_unavailable": 404, "thread_exists": 409, "not_found": 404,
    "thread_rename_unsupported": 501, "approval_closed": 409, "unknown_agent": 400, "config_invalid": 400,
}  # fmt: skip


@attrs.define
class WebState:
    """What the routes share."""

    hub: Hub
    chats: ChatManager
    bots: BotManager
    sessions: Sessions
    token: str | None
    started: float = attrs.Factory(time.time)
    #: Failed credentials per client address: the login form's and the security wall's (one throttle).
    logins: Throttle = attrs.Factory(Throttle)


def _error(exc: AgentrtError) -> JSONResponse:
    return JSONResponse({"error": {"code": exc.code, "detail": exc.detail}}, status_code=_STATUS.get(exc.code, 502))


def build_app(state: WebState, *, loopback_only: bool, secure_cookie: bool = False) -> Any:
    """The ASGI application, wrapped in the security middleware."""
    # Autoescaping on for every template: only ``| markdown`` output (already safe) is marked safe.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")), autoescape=True, auto_reload=False
    )
    env.globals["relative_time"] = relative_time
    env.globals["until"] = until
    env.filters["markdown"] = render_markdown
    env.globals["step_text"] = step_text

    async def page(name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        # Rendering a long thread (Markdown of every turn) is CPU work: keep it off the trio thread.
        template = env.get_template(name)
        html = await trio.to_thread.run_sync(template.render, context)
        return HTMLResponse(html, status_code=status_code)

    def ctx(request: Request, **extra: Any) -> dict[str, Any]:
        session = getattr(request.state, "session", None)
        return {"request": request, "csrf": session.csrf if session is not None else "",
                "auth_enabled": state.token is not None, "bots_available": state.bots.available,
                "agent_name": state.chats.agent_name(), "model": state.chats.launch.model or "",
                "agent_choices": state.chats.agents.choices(), **extra}

    async def not_found(request: Request, exc: Exception | None = None, detail: str = "") -> Response:
        # Browsers get a page to find their way back from; API and stream clients get the usual JSON.
        detail = detail or "There is nothing at this address."
        if request.url.path.startswith(("/api/", "/events/", "/static/")) or _wants_json(request):
            return JSONResponse({"error": {"code": "not_found", "detail": detail}}, status_code=404)
        return await page("404.html", ctx(request, detail=detail, path=request.url.path), status_code=404)

    def thread_name(request: Request) -> str:
        name = str(request.path_params["name"])
        if not valid_thread_name(name):
            raise AgentrtError("invalid_thread_name", "thread names are 1-64 of [A-Za-z0-9._-]")
        return name

    # -- pages -------------------------------------------------------------
    async def index(request: Request) -> Response:
        threads = await state.chats.list_threads(request.query_params.get("q", ""))
        return await page("chat.html", ctx(
            request, threads=threads, thread=None, turns=[], live=None, messages={},
            model=await state.chats.model(None), q=request.query_params.get("q", "")))

    async def thread_page(request: Request) -> Response:
        try:
            name = thread_name(request)
            if not await state.chats.exists(name):
                raise AgentrtError("unknown_thread", "no such thread")
        except AgentrtError as exc:
            if exc.code == "unknown_thread":
                return await not_found(request, detail="There is no thread by that name. It may have been "
                                       "deleted or renamed.")
            return PlainTextResponse(f"{exc.code}: {exc.detail}", status_code=_STATUS.get(exc.code, 400))
        threads = await state.chats.list_threads(request.query_params.get("q", ""))
        await state.chats.settle(name)
        turns = await thread_turns(state.chats, name)  # long replies cut to their first part
        messages = await failure_messages(state.chats.store, name, turns)
        shown = await stored_steps(state.chats.store, name, turns)  # tool steps, from the replayed events
        turns = [with_steps(t, shown) for t in turns]
        # The live turn and the stream position are read together (no await between them):
        # the page's stream replays exactly what came after this view.
        live = state.chats.live(name)
        live_state = live.sink.live.public() if live is not None and live.busy else None
        if live_state is not None and turns and turns[-1].get("outcome") in (None, "running"):
            turns = turns[:-1]  # the database's row of the turn in flight: drawn live instead
        last = state.hub.last_id(f"thread:{name}")
        agent = await state.chats.thread_agent(name)
        return await page("chat.html", ctx(
            request, threads=threads, thread=name, turns=turns, live=live_state, messages=messages,
            model=await state.chats.model(name), q=request.query_params.get("q", ""), last=last,
            agent_name=state.chats.agents.label(agent), thread_agent=agent or ""))

    async def bots_page(request: Request) -> Response:
        last = state.hub.last_id("bots")  # before reading: later changes are replayed
        bots = [public_bot(r) for r in await state.bots.list()]
        counts: dict[str, int] = {}
        for b in bots:
            counts[b["status"]] = counts.get(b["status"], 0) + 1
        return await page("bots.html", ctx(
            request, bots=bots, counts=sorted(counts.items()), mode=state.bots.mode, last=last))

    async def bot_page(request: Request) -> Response:
        last = state.hub.last_id(f"bot:{request.path_params['bot_id']}")
        try:
            rec = await state.bots.get(str(request.path_params["bot_id"]))
        except AgentrtError as exc:
            return await not_found(request, detail=exc.detail)
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
        except ValueError:
            offset = 0
        timeline = await state.bots.timeline(rec.bot_id, offset, _TIMELINE_PAGE + 1)
        more = len(timeline) > _TIMELINE_PAGE
        name = "_bot_body.html" if request.query_params.get("fragment") == "1" else "bot.html"
        return await page(name, ctx(
            request, bot=public_bot(rec), timeline=list(timeline)[:_TIMELINE_PAGE], offset=offset, more=more,
            page=_TIMELINE_PAGE, actions=ACTIONS, mode=state.bots.mode, last=last))

    async def bot_qr(request: Request) -> Response:
        try:
            rec = await state.bots.get(str(request.path_params["bot_id"]))
        except AgentrtError as exc:
            return PlainTextResponse(f"{exc.code}: {exc.detail}", status_code=404)
        url = qr_url_of(rec)
        if url is None:
            return PlainTextResponse("no_qr_code: the bot is not waiting for a QR login", status_code=404,
                                     headers={"cache-control": "no-store"})
        return Response(qr_svg(url), media_type="image/svg+xml", headers={"cache-control": "no-store"})

    async def bot_action(request: Request) -> Response:
        bot_id = str(request.path_params["bot_id"])
        action = str(request.path_params["action"])
        try:
            await state.bots.act(bot_id, action)
        except AgentrtError as exc:
            if _wants_json(request):
                return _error(exc)
            return PlainTextResponse(f"{exc.code}: {exc.detail}", status_code=_STATUS.get(exc.code, 502))
        if _wants_json(request):
            return JSONResponse({"ok": True})
        return RedirectResponse(f"/bots/{bot_id}", status_code=303)

    # -- login ---------------------------------------------------------------
    async def login_page(request: Request) -> Response:
        return await page("login.html", ctx(
            request, login=True, error=None, next=_next(request.query_params.get("next", "/"))))

    async def login_submit(request: Request) -> Response:
        form = await request.form()
        security: SecurityMiddleware = request.state.security
        nxt = _next(str(form.get("next", "/")))
        candidate = str(form.get("token", ""))
        client = request.client.host if request.client is not None else ""
        if not state.logins.allowed(client):
            response = await page("login.html", ctx(
                request, login=True, error="Too many attempts; wait a minute.", next=nxt), status_code=429)
            response.headers["retry-after"] = str(state.logins.retry_after(client) or 1)
            return response
        if state.token is None or not security.check_token(candidate):
            state.logins.failed(client)
            return await page("login.html", ctx(
                request, login=True, error="That token is not right.", next=nxt), status_code=401)
        old = request.state.session
        if old is not None:
            state.sessions.drop(old.id)
        fresh = state.sessions.login()  # a new id on login: no session fixation
        response = RedirectResponse(nxt, status_code=303)
        key, value = security.cookie_header(fresh)
        response.raw_headers.append((key, value))
        return response

    async def logout(request: Request) -> Response:
        if request.state.session is not None:
            state.sessions.drop(request.state.session.id)
        return RedirectResponse("/login", status_code=303)

    # -- API -------------------------------------------------------------------
    async def api_threads(request: Request) -> Response:
        return JSONResponse({"threads": await state.chats.list_threads(request.query_params.get("q", ""))})

    async def api_new_thread(request: Request) -> Response:
        try:
            body = await _json(request) if await request.body() else {}
            agent = body.get("agent") or None
            if agent is not None and not isinstance(agent, str):
                raise AgentrtError("bad_request", "agent must be the name of a configured agent")
            name = await state.chats.create(agent)
        except AgentrtError as exc:
            return _error(exc)
        return JSONResponse({"name": name, "url": f"/threads/{name}"}, status_code=201)

    async def api_send(request: Request) -> Response:
        try:
            name = thread_name(request)
            body = await _json(request)
            text = body.get("text")
            if not isinstance(text, str):
                raise AgentrtError("bad_request", "text must be a string")
            key = await state.chats.send(name, text)
        except AgentrtError as exc:
            return _error(exc)
        return JSONResponse({"ok": True, "turn": key}, status_code=202)

    async def api_cancel(request: Request) -> Response:
        try:
            name = thread_name(request)
            body = await _json(request) if await request.body() else {}
            key = body.get("turn")
            if key is not None and not isinstance(key, str):
                raise AgentrtError("bad_request", "turn must be the key a message was answered with")
            cancelled = await state.chats.cancel(name, key)
        except AgentrtError as exc:
            return _error(exc)
        return JSONResponse({"cancelled": cancelled})

    async def api_approval(request: Request) -> Response:
        try:
            name = thread_name(request)
            body = await _json(request)
            decision = body.get("decision")
            if not isinstance(decision, str):
                raise AgentrtError("bad_request", "decision must be allow, deny or always")
            answered = state.chats.approvals.answer(name, str(request.path_params["qid"]), decision)
        except AgentrtError as exc:
            return _error(exc)
        if not answered:
            return _error(AgentrtError("approval_closed", "the question was already answered or expired"))
        return JSONResponse({"answered": decision})

    async def api_delete(request: Request) -> Response:
        try:
            name = thread_name(request)
            ok = await state.chats.delete(name)
        except AgentrtError as exc:
            return _error(exc)
        if not ok:
            return _error(AgentrtError("unknown_thread", "no such thread"))
        state.hub.forget(f"thread:{name}")
        return JSONResponse({"deleted": name})

    async def api_rename(request: Request) -> Response:
        try:
            name = thread_name(request)
            body = await _json(request)
            new = body.get("name")
            if not isinstance(new, str):
                raise AgentrtError("bad_request", "name must be a string")
            new = new.strip()
            await state.chats.rename(name, new)
        except AgentrtError as exc:
            return _error(exc)
        state.hub.forget(f"thread:{name}")
        return JSONResponse({"name": new, "url": f"/threads/{new}"})

    async def api_bots(request: Request) -> Response:
        return JSONResponse({"bots": [public_bot(r) for r in await state.bots.list()], "mode": state.bots.mode})

    # -- streams ---------------------------------------------------------------
    def sse(request: Request, topic: str) -> SSEResponse:
        # The browser's Last-Event-ID (a reconnect) wins over the id the page was drawn at.
        last = request.headers.get("last-event-id") or request.query_params.get("last")
        sub = state.hub.subscribe(topic, last)  # before the response starts: nothing slips through
        return SSEResponse(state.hub.stream(sub), headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    # A stream only for what exists: a topic per made-up id would grow memory without bound.
    async def thread_events(request: Request) -> Response | SSEResponse:
        try:
            name = thread_name(request)
            if not await state.chats.exists(name):
                raise AgentrtError("unknown_thread", "no such thread")
        except AgentrtError as exc:
            return _error(exc)
        return sse(request, f"thread:{name}")

    async def bots_events(request: Request) -> Response | SSEResponse:
        return sse(request, "bots")

    async def bot_events(request: Request) -> Response | SSEResponse:
        try:
            rec = await state.bots.get(str(request.path_params["bot_id"]))
        except AgentrtError as exc:
            return _error(exc)
        return sse(request, f"bot:{rec.bot_id}")

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "uptime": round(time.time() - state.started, 3)})

    async def favicon(request: Request) -> Response:
        return Response(status_code=204, headers={"cache-control": "max-age=86400"})

    routes = [
        Route("/", index),
        Route("/favicon.ico", favicon),
        Route("/threads/{name}", thread_page),
        Route("/threads/{name}/replies/{conversation}/{turn}",
              reply_part_route(state.chats, thread_name, page, ctx, not_found)),
        Route("/bots", bots_page),
        Route("/bots/{bot_id}", bot_page),
        Route("/bots/{bot_id}/qr.svg", bot_qr),
        Route("/bots/{bot_id}/{action}", bot_action, methods=["POST"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login_submit, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/health", health),
        Route("/api/threads", api_threads, methods=["GET"]),
        Route("/api/threads", api_new_thread, methods=["POST"]),
        Route("/api/threads/{name}/messages", api_send, methods=["POST"]),
        Route("/api/threads/{name}/cancel", api_cancel, methods=["POST"]),
        Route("/api/threads/{name}/delete", api_delete, methods=["POST"]),
        Route("/api/threads/{name}/rename", api_rename, methods=["POST"]),
        Route("/api/threads/{name}/approvals/{qid}", api_approval, methods=["POST"]),
        Route("/api/bots", api_bots),
        Route("/events/threads/{name}", thread_events),
        Route("/events/bots", bots_events),
        Route("/events/bots/{bot_id}", bot_events),
        Mount("/static", app=StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found})
    return SecurityMiddleware(
        app, sessions=state.sessions, token=state.token, loopback_only=loopback_only, secure_cookie=secure_cookie,
        throttle=state.logins,
    )


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _next(value: str) -> str:
    return value if value.startswith("/") and not value.startswith("//") and "\\" not in value else "/"


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except Exception:
        raise AgentrtError("bad_request", "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise AgentrtError("bad_request", "the body must be a JSON object")
    return body
