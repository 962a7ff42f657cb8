"""The tool's HTTP client for the control plane: bounded, redirect-free, strict about responses (§B)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import trio

from agentrt import AgentrtError
from agentrt.errors import ToolError

from ._config import ClientConfig, tls_verify

__all__ = ["ControlPlaneClient", "USER_AGENT", "MAX_RESPONSE_BYTES"]

USER_AGENT = "agentrt-managed-task/0.1"
MAX_RESPONSE_BYTES = 2 * 1024 * 1024
_PATH = re.compile(r"^/v1/(tasks|tasks/[0-9a-f-]+)$")


class TransportFailure(ToolError):
    """The request may or may not have reached the control plane (timeout, reset, refused)."""

    def __init__(self, code: str, detail: str, *, connected: bool) -> None:
        super().__init__(code, detail)
        # False only when the connection was never established, so nothing was sent.
        self.connected = connected


class ControlPlaneClient:
    """Talks to ``/v1/tasks`` with the configured key; every request bounded by ``request_timeout``."""

    def __init__(self, config: ClientConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._config = config
        self._client = httpx.AsyncClient(
            base_url=config.base_url,
            follow_redirects=False,
            trust_env=False,  # never pick up proxies or netrc credentials from the environment
            timeout=httpx.Timeout(config.request_timeout),
            headers={
                "accept": "application/json",
                "authorization": f"Bearer {config.api_key}",
                "content-type": "application/json",
                "user-agent": USER_AGENT,
            },
            transport=transport,
            verify=tls_verify(config.ca_file),
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """One request; the parsed JSON object, or an :class:`AgentrtError` with a §B code."""
        if not _PATH.match(path):
            raise AgentrtError("invalid_control_plane_path", "refusing an unexpected control-plane path")
        content = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False)
        with trio.move_on_after(self._config.request_timeout) as scope:
            try:
                async with self._client.stream(method, path, content=content) as response:
                    return await self._read(response)
            except httpx.ConnectError as exc:
                raise TransportFailure(
                    "control_plane_unreachable", "could not connect to the control plane", connected=False
                ) from exc
            except httpx.TimeoutException as exc:
                raise TransportFailure(
                    "control_plane_timeout", "the control plane did not answer in time", connected=True
                ) from exc
            except httpx.TransportError as exc:
                raise TransportFailure(
                    "control_plane_transport_error",
                    f"the control-plane connection failed ({type(exc).__name__})",
                    connected=True,
                ) from exc
        assert scope.cancelled_caught
        raise TransportFailure("control_plane_timeout", "the control plane did not answer in time", connected=True)

    async def _read(self, response: httpx.Response) -> dict[str, Any]:
        status = response.status_code
        if 300 <= status < 400:
            raise AgentrtError("control_plane_redirect_rejected", f"the control plane answered {status}")
        if not 200 <= status < 300:
            raise AgentrtError(f"control_plane_http_{status}", f"the control plane answered {status}")
        if "application/json" not in response.headers.get("content-type", "").lower():
            raise AgentrtError("control_plane_response_not_json", "the control plane did not answer JSON")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise AgentrtError("control_plane_response_oversize", "the control-plane response exceeds 2 MiB")
            chunks.append(chunk)
        try:
            value = json.loads(b"".join(chunks))
        except ValueError as exc:
            raise AgentrtError("invalid_control_plane_response", "the control-plane response is not JSON") from exc
        if not isinstance(value, dict):
            raise AgentrtError("invalid_control_plane_response", "the control-plane response is not an object")
        return value
