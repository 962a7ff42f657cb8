"""The public API of agentrt-web (everything else in this package is private).

Import from here to serve the web UI from your own trio program::

    from agentrt_web.api import WebOptions, serve_web
"""

from __future__ import annotations

from ._server import WebOptions as WebOptions
from ._server import resolve_token as resolve_token
from ._server import serve_web as serve_web

__all__ = ["WebOptions", "resolve_token", "serve_web"]
