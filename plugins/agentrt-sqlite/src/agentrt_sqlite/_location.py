"""Where the database lives: ``AGENTRT_DATABASE_URL`` or the user's data directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agentrt.errors import AgentrtError

__all__ = ["database_path", "DEFAULT_FILE"]

DEFAULT_FILE = "agentrt.db"


def database_path(env: Mapping[str, str] | None = None) -> Path:
    """The SQLite file to use.

    ``AGENTRT_DATABASE_URL`` (``sqlite:///abs/path.db``) wins; else
    ``$XDG_DATA_HOME/agentrt/agentrt.db``, else ``~/.local/share/agentrt/agentrt.db``.
    platformdirs is not used: on macOS and Windows it picks other directories,
    and this location is part of the documented contract.
    """
    env = os.environ if env is None else env
    url = env.get("AGENTRT_DATABASE_URL", "").strip()
    if url:
        return _from_url(url)
    base = env.get("XDG_DATA_HOME", "").strip()
    # The XDG spec says relative values are invalid and must be ignored.
    if base and os.path.isabs(base):
        root = Path(base)
    else:
        home = env.get("HOME", "").strip() or os.path.expanduser("~")
        root = Path(home) / ".local" / "share"
    return root / "agentrt" / DEFAULT_FILE


def _from_url(url: str) -> Path:
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise AgentrtError("invalid_database_url", "AGENTRT_DATABASE_URL must look like sqlite:///abs/path.db")
    if scheme.lower() != "sqlite":
        # Name the scheme only: the rest of a URL may hold a password.
        raise AgentrtError(
            "unsupported_database_url",
            f"database scheme {scheme.lower()!r} is not supported (only sqlite:///abs/path.db)",
        )
    if not rest.startswith("/") or rest.startswith("//"):
        raise AgentrtError(
            "invalid_database_url", "a sqlite URL needs an absolute path: sqlite:///abs/path.db"
        )
    if "?" in rest or "#" in rest or "\x00" in rest:
        raise AgentrtError("invalid_database_url", "sqlite URL must not carry a query or fragment")
    return Path(rest)
