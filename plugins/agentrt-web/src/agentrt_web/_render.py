"""Server-side rendering helpers: agent Markdown to safe HTML, QR codes to SVG, relative times.

Agent output is untrusted.  Markdown is rendered with markdown-it-py with raw
HTML disabled (``<script>`` and ``<img onerror>`` come out as text) and its
link validator (no ``javascript:``, ``vbscript:``, ``file:`` or non-image
``data:`` URLs); links additionally get ``rel="noopener noreferrer nofollow"``.
The Content-Security-Policy (no inline script at all) is the second wall.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

__all__ = ["render_markdown", "qr_svg", "relative_time", "until", "title_of", "utf16_len", "MAX_TITLE"]

#: Thread titles are cut to this many characters.
MAX_TITLE = 60


@lru_cache(maxsize=1)
def _md() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])

    def link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        rendered: str = renderer.renderToken(tokens, idx, options, env)
        return rendered

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: str) -> str:
    """``text`` (an agent's reply) as HTML that carries no script, handler or dangerous URL.

    Replies under 20 000 characters are cached: a thread's page renders the same ones on
    every visit (the bound keeps the cache's memory bounded too).
    """
    return _cached(text) if len(text) < 20_000 else _render(text)


@lru_cache(maxsize=512)
def _cached(text: str) -> str:
    return _render(text)


def _render(text: str) -> str:
    try:
        html: str = _md().render(text)
    except Exception:  # never lose a reply to a renderer bug: show it as escaped text
        import html as _html

        return f"<pre>{_html.escape(text)}</pre>"
    return html


def utf16_len(text: str) -> int:
    """The length of ``text`` as a browser counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def qr_svg(url: str) -> str:
    """The QR code of ``url`` as a standalone SVG document (black on white, quiet zone kept)."""
    import io

    import segno

    buf = io.BytesIO()
    segno.make_qr(url, error="m").save(buf, kind="svg", scale=6, border=4, dark="#000", light="#fff", xmldecl=True)
    return buf.getvalue().decode()


def relative_time(then: float | None, now: float | None = None) -> str:
    """``then`` (Unix time) as "just now", "5 min ago", "3 h ago", "2 d ago"."""
    if then is None:
        return ""
    delta = max(0.0, (time.time() if now is None else now) - then)
    if delta < 45:
        return "just now"
    if delta < 3600:
        return f"{round(delta / 60)} min ago"
    if delta < 86400:
        return f"{round(delta / 3600)} h ago"
    return f"{round(delta / 86400)} d ago"


def until(when: float | None, now: float | None = None) -> str:
    """A future Unix time as "in 12 s" ("" when unset or past)."""
    if when is None:
        return ""
    delta = when - (time.time() if now is None else now)
    if delta <= 0:
        return ""
    return f"in {round(delta)} s" if delta < 120 else f"in {round(delta / 60)} min"


def title_of(prompt: str | None, fallback: str) -> str:
    """A thread title from its first prompt: the first line, bounded."""
    if not prompt:
        return fallback
    first = prompt.strip().split("\n", 1)[0].strip()
    if not first:
        return fallback
    return first if len(first) <= MAX_TITLE else first[: MAX_TITLE - 1] + "…"
