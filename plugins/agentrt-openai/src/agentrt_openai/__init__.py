"""agentrt provider ``openai``: any OpenAI-compatible streaming ``/chat/completions`` server.

This module holds the hook implementation only; the provider, its
configuration and its parsers live in modules imported on first use, so that
loading the plugin costs nothing at CLI start-up.  Public names:
:class:`OpenAIProvider`, :class:`OpenAIConfig`, :func:`from_env`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentrt import hookimpl

if TYPE_CHECKING:
    from agentrt.provider import Provider, ProviderFactory

    from ._provider import OpenAIProvider as OpenAIProvider
    from ._sse import SSEDecoder as SSEDecoder
    from .config import OpenAIConfig as OpenAIConfig
    from .config import from_env as from_env

__all__ = ["OpenAIProvider", "OpenAIConfig", "SSEDecoder", "from_env", "agentrt_register_providers"]

_LAZY = {
    "OpenAIProvider": "agentrt_openai._provider",
    "OpenAIConfig": "agentrt_openai.config",
    "from_env": "agentrt_openai.config",
    "SSEDecoder": "agentrt_openai._sse",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrt_openai' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def _factory(env: Mapping[str, str]) -> Provider:
    from ._provider import OpenAIProvider
    from .config import from_env

    return OpenAIProvider(from_env(env))


@hookimpl
def agentrt_register_providers(register: Callable[[str, ProviderFactory], None]) -> None:
    """Register the ``openai`` provider; its factory reads ``AGENTRT_API_*`` from the agent's env."""
    register("openai", _factory)
