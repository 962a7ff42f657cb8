"""What the operator opts into for ACP sessions: MCP servers passed through, client file access."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from agentrt.errors import AgentrtError

__all__ = ["AcpOptions", "MAX_FILE_BYTES"]

#: Files read or written for the agent (``fs/*``) are refused above this size.
MAX_FILE_BYTES = 4 * 1024 * 1024

_FS_MODES = {"": (False, False), "off": (False, False), "read": (True, False), "write": (True, True)}


@attrs.frozen(kw_only=True)
class AcpOptions:
    """Client-side choices of an ACP host: all capabilities off unless enabled.

    ``mcp_servers`` go to ``session/new``/``session/load`` as given (ACP's
    ``McpServer`` objects); ``fs_read``/``fs_write`` advertise and serve
    ``fs/read_text_file``/``fs/write_text_file``, confined to the session's
    working directory.  Terminals are never offered.
    """

    mcp_servers: tuple[Mapping[str, Any], ...] = ()
    fs_read: bool = False
    fs_write: bool = False
    max_file_bytes: int = MAX_FILE_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AcpOptions:
        """Read ``AGENTRT_ACP_MCP_SERVERS_JSON`` (a JSON array) and ``AGENTRT_ACP_FS`` (``off``/``read``/``write``)."""
        env = os.environ if env is None else env
        servers: tuple[Mapping[str, Any], ...] = ()
        raw = env.get("AGENTRT_ACP_MCP_SERVERS_JSON", "").strip()
        if raw:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise AgentrtError("invalid_acp_mcp_servers", "AGENTRT_ACP_MCP_SERVERS_JSON is not JSON") from None
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise AgentrtError(
                    "invalid_acp_mcp_servers", "AGENTRT_ACP_MCP_SERVERS_JSON must be an array of objects"
                )
            servers = tuple(value)
        mode = env.get("AGENTRT_ACP_FS", "").strip().lower()
        if mode not in _FS_MODES:
            raise AgentrtError("invalid_acp_fs", "AGENTRT_ACP_FS must be off, read or write")
        fs_read, fs_write = _FS_MODES[mode]
        return cls(mcp_servers=servers, fs_read=fs_read, fs_write=fs_write)
