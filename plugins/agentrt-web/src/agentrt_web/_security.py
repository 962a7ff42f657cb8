"""The security wall in front of every route: headers, sessions, the token, CSRF, the Host check.

* Every response gets a strict Content-Security-Policy (``default-src 'self'``,
  no inline script or style, ``frame-ancestors 'none'``),
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``
  (with ``no-referrer`` browsers send ``Origin: null`` on same-origin forms)
  and, unless the route set one, ``Cache-Control: no-store``.
* Every browser gets a session cookie (random id, ``HttpOnly``,
  ``SameSite=Strict``); its CSRF token is an HMAC of that id, and only a
  login creates a server-side record (see :class:`Sessions`); every
  POST must carry that token (``X-CSRF-Token`` header or ``csrf`` form field)
  unless it is authenticated with a bearer header, which a browser never
  attaches on its own.  A cross-origin ``Origin`` header is refused too.
* With a token configured (required when not bound to loopback), nothing but
  ``/login`` and the static files is served until the session has logged in
  or the request carries ``Authorization: Bearer <token>``: pages redirect to
  the login form, streams and API calls get 401.
* Every failed credential (a wrong login token, a wrong bearer token, a
  session cookie that names no session of this server) counts against its
  client address in one :class:`~agentrt_web._sessions.Throttle`; past its ``ATTEMPTS`` failures
  in ``WINDOW`` seconds, every credential from that address (a right one
  too) gets 429 until the window has room again.
* Bound to loopback, the ``Host`` header must name a loopback host, so a DNS
  rebinding page cannot talk to the server.

The token itself is never stored in a cookie, rendered or logged: the cookie
carries only the random session id.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agentrt.net import is_loopback_host

from ._sessions import SESSION_TTL, Session, Sessions, Throttle
from ._sse import BODY_SEND

__all__ = ["SecurityMiddleware", "CSP", "COOKIE"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
COOKIE = "agentrt_session"
_PUBLIC_PREFIXES = ("/static/", "/login", "/favicon.ico")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_FORM_PEEK = 64 * 1024


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return str(v.decode("latin-1"))
    return None


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


class SecurityMiddleware:
    """Pure ASGI middleware (it never buffers a streaming body)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        sessions: Sessions,
        token: str | None,
        loopback_only: bool,
        secure_cookie: bool = False,
        throttle: Throttle | None = None,
    ) -> None:
        self.app = app
        self.sessions = sessions
        self.token = token
        self.loopback_only = loopback_only
        self.secure_cookie = secure_cookie
        #: Failed credentials per client address (the login form counts in the same one).
        self.throttle = Throttle() if throttle is None else throttle

    def check_token(self, candidate: str) -> bool:
        """Constant-time comparison with the configured token."""
        if self.token is None:
            return True
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def cookie_header(self, session: Session) -> tuple[bytes, bytes]:
        """The ``Set-Cookie`` header carrying ``session``'s id."""
        parts = [f"{COOKIE}={session.id}", "Path=/", "HttpOnly", "SameSite=Strict", f"Max-Age={int(SESSION_TTL)}"]
        if self.secure_cookie:
            parts.append("Secure")
        return b"set-cookie", "; ".join(parts).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "/")
        method: str = scope.get("method", "GET")
        host = _header(scope, b"host") or ""
        if self.loopback_only and not is_loopback_host(urlsplit(f"//{host}").hostname or ""):
            await _plain(send, 421, "misdirected_request: this server answers only to a loopback Host")
            return

        client = _client(scope)
        guarded = self.token is not None  # with no token there is no credential to guess
        bearer = False
        auth = _header(scope, b"authorization")
        if auth and auth[:7].lower() == "bearer ":
            if guarded and not self.throttle.allowed(client):
                await self._throttled(send, client)
                return
            if self.token is None or not self.check_token(auth[7:].strip()):
                if guarded:
                    self.throttle.failed(client)
                await _plain(send, 401, "unauthorized: bad bearer token", extra=[(b"www-authenticate", b"Bearer")])
                return
            bearer = True

        public = any(path.startswith(p) for p in _PUBLIC_PREFIXES)
        presented = _cookie(scope, COOKIE)
        session = self.sessions.get(presented)
        if guarded and not bearer and not public:
            # A cookie naming no session of this server run is a failed credential (counted once:
            # the response replaces it); a logged-in one waits out the throttle like any other.
            stale = presented is not None and session is None
            if (stale or (session is not None and session.authenticated)) and not self.throttle.allowed(client):
                await self._throttled(send, client)
                return
            if stale:
                self.throttle.failed(client)
        set_cookie: tuple[bytes, bytes] | None = None
        if session is None and not bearer:
            # Nothing is stored for it: anonymous traffic must not grow (or evict from) the session table.
            session = self.sessions.anonymous()
            set_cookie = self.cookie_header(session)
        scope.setdefault("state", {})
        scope["state"]["session"] = session
        scope["state"]["bearer"] = bearer
        scope["state"]["security"] = self

        authed = bearer or (session is not None and (session.authenticated or self.token is None))

        if method not in _SAFE_METHODS and not bearer:
            origin = _header(scope, b"origin")
            if origin and origin != "null" and urlsplit(origin).netloc != host:
                await _plain(send, 403, "csrf_failed: cross-origin request")
                return
            if origin == "null":
                await _plain(send, 403, "csrf_failed: opaque origin")
                return
            checked = await _check_csrf(scope, receive, session)
            if checked is None:
                await _plain(send, 403, "csrf_failed: missing or wrong CSRF token", set_cookie=set_cookie)
                return
            receive = checked

        if not authed and not public:
            accept = _header(scope, b"accept") or ""
            if method == "GET" and "text/html" in accept and not path.startswith(("/api/", "/events/")):
                await _redirect(send, "/login?next=" + _safe_next(path), set_cookie=set_cookie)
            else:
                await _plain(send, 401, "unauthorized: log in or send a bearer token", set_cookie=set_cookie)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                headers.extend(_security_headers(names))
                if set_cookie is not None:
                    headers.append(set_cookie)
                message["headers"] = headers
            await send(message)

        # A stream sends its frames past every layer (only the response start needs them).
        scope[BODY_SEND] = send
        await self.app(scope, receive, send_wrapper)


    async def _throttled(self, send: Send, client: str) -> None:
        wait = self.throttle.retry_after(client) or 1
        await _plain(send, 429, "too_many_attempts: too many failed credentials from this address; try again later",
                     extra=[(b"retry-after", str(wait).encode())])


def _client(scope: Scope) -> str:
    """The client's address (the throttle's key)."""
    client = scope.get("client")
    return str(client[0]) if client else ""


def _safe_next(path: str) -> str:
    # Only same-site paths: an absolute URL here would be an open redirect.
    from urllib.parse import quote

    if not path.startswith("/") or path.startswith("//"):
        return "/"
    return quote(path, safe="/")


def _security_headers(present: set[bytes]) -> list[tuple[bytes, bytes]]:
    out = [
        (b"content-security-policy", CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
        (b"cross-origin-opener-policy", b"same-origin"),
    ]
    if b"cache-control" not in present:
        out.append((b"cache-control", b"no-store"))
    return out


async def _check_csrf(scope: Scope, receive: Receive, session: Session | None) -> Receive | None:
    """The receive callable to pass on (the body replayed) when the CSRF token is right, else ``None``."""
    if session is None:
        return None
    given = _header(scope, b"x-csrf-token")
    if given is not None:
        return receive if hmac.compare_digest(given.encode(), session.csrf.encode()) else None
    ctype = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        return None
    # Read the (small) form body to find the token, then replay it to the app.
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body = message.get("body", b"")
        size += len(body)
        if size > _MAX_FORM_PEEK:
            return None
        chunks.append(body)
        more = message.get("more_body", False)
    body = b"".join(chunks)
    values = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).get("csrf", [])
    if not values or not hmac.compare_digest(values[0].encode(), session.csrf.encode()):
        return None
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _plain(
    send: Send,
    status: int,
    text: str,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
    set_cookie: tuple[bytes, bytes] | None = None,
) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
    headers += _security_headers(set())
    if set_cookie is not None:
        headers.append(set_cookie)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str, *, set_cookie: tuple[bytes, bytes] | None = None) -> None:
    headers = [(b"location", location.encode()), (b"content-length", b"0")] + _security_headers(set())
    if set_cookie is not None:
        headers.append(set_cookie)
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
