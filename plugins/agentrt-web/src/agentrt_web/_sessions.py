"""Who is at the browser: sessions (logged in, or anonymous and stored nowhere) and the credential throttle.

The security wall (:mod:`agentrt_web._security`) reads them on every request:
:class:`Sessions` tells a logged-in session, an anonymous id this server run
issued, and a guess apart; :class:`Throttle` counts failed credentials per
client address.  Both are bounded, so neither anonymous traffic nor guessing
grows memory.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
import secrets
import time
from collections import OrderedDict

import attrs

__all__ = ["Sessions", "Session", "Throttle", "ATTEMPTS", "WINDOW", "SESSION_TTL"]

_MAX_SESSIONS = 10_000
#: How long a login lasts (also the cookie's ``Max-Age``).
SESSION_TTL = 7 * 86400.0
_SID = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
#: Failed credentials allowed per client address and window (a token cannot be guessed online).
ATTEMPTS = 5
WINDOW = 60.0
_MAX_CLIENTS = 10_000


class Throttle:
    """At most :data:`ATTEMPTS` failed credentials per client address per :data:`WINDOW` seconds.

    One table for every kind of credential (login form, bearer header, session cookie), so
    switching kinds buys an attacker nothing.  Bounded: past :data:`_MAX_CLIENTS` addresses
    the oldest go first.
    """

    def __init__(self, attempts: int = ATTEMPTS, window: float = WINDOW) -> None:
        self.attempts = attempts
        self.window = window
        self._failures: dict[str, list[float]] = {}

    def _recent(self, client: str) -> list[float]:
        now = time.monotonic()
        kept = [t for t in self._failures.get(client, []) if now - t < self.window]
        if kept:
            self._failures[client] = kept
        else:
            self._failures.pop(client, None)
        return kept

    def allowed(self, client: str) -> bool:
        """Whether ``client`` may present a credential now."""
        return len(self._recent(client)) < self.attempts

    def retry_after(self, client: str) -> int:
        """Whole seconds until ``client`` may try again (0: now)."""
        recent = self._recent(client)
        if len(recent) < self.attempts:
            return 0
        return max(1, math.ceil(recent[-self.attempts] + self.window - time.monotonic()))

    def failed(self, client: str) -> None:
        """Count one failed credential of ``client``."""
        self._failures.setdefault(client, []).append(time.monotonic())
        while len(self._failures) > _MAX_CLIENTS:
            del self._failures[next(iter(self._failures))]


@attrs.define
class Session:
    """One browser's state: its id, its CSRF token, whether it logged in."""

    id: str
    csrf: str
    authenticated: bool = False
    created: float = attrs.field(factory=time.time)


class Sessions:
    """Logged-in sessions by id (bounded: the oldest go first; expiring); nothing kept for anyone else.

    A browser that has not logged in holds only a random id in its cookie; its CSRF token is an HMAC of
    that id under a key of this server run.  So cookie-less traffic costs the server no memory and can
    never push a logged-in user out of the table: only a login (which needs the token) adds a row.
    Such an anonymous id carries its own MAC (16 random bytes, then 16 of an HMAC of them), so an id
    that is neither a logged-in session nor one this server run issued is told apart: a guess, or a
    stale cookie (logged out, expired, another server run).
    """

    def __init__(self, limit: int | None = None) -> None:
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self._key = secrets.token_bytes(32)
        self.limit = _MAX_SESSIONS if limit is None else limit

    def __len__(self) -> int:
        """How many logged-in sessions are kept."""
        return len(self._by_id)

    def csrf_of(self, sid: str) -> str:
        """The CSRF token of the browser whose id is ``sid`` (derived, never stored)."""
        return hmac.new(self._key, sid.encode(), hashlib.sha256).hexdigest()

    def get(self, sid: str | None) -> Session | None:
        """The session of ``sid``: logged in, anonymous (an id this server run issued), else ``None``."""
        if not sid or not _SID.fullmatch(sid):
            return None
        s = self._by_id.get(sid)
        if s is not None and time.time() - s.created > SESSION_TTL:
            del self._by_id[sid]
            s = None
        if s is not None:
            return s
        raw = base64.urlsafe_b64decode(sid + "=")
        if not hmac.compare_digest(raw[16:], self._anonymous_mac(raw[:16])):
            return None
        return Session(id=sid, csrf=self.csrf_of(sid))

    def _anonymous_mac(self, nonce: bytes) -> bytes:
        return hmac.new(self._key, b"anonymous:" + nonce, hashlib.sha256).digest()[:16]

    def anonymous(self) -> Session:
        """A fresh id for a browser that has none (nothing is stored: the id carries its own MAC)."""
        nonce = secrets.token_bytes(16)
        sid = base64.urlsafe_b64encode(nonce + self._anonymous_mac(nonce)).rstrip(b"=").decode()
        return Session(id=sid, csrf=self.csrf_of(sid))

    def login(self) -> Session:
        """A fresh, logged-in session (a new id: no session fixation), kept until it expires or is dropped."""
        sid = secrets.token_urlsafe(32)
        s = Session(id=sid, csrf=self.csrf_of(sid), authenticated=True)
        self._by_id[s.id] = s
        now = time.time()
        # Rows are in login order: the expired ones are at the front.
        while self._by_id:
            oldest = next(iter(self._by_id.values()))
            if now - oldest.created <= SESSION_TTL and len(self._by_id) <= self.limit:
                break
            self._by_id.popitem(last=False)
        return s

    def drop(self, sid: str) -> None:
        """Forget a session (logout)."""
        self._by_id.pop(sid, None)
