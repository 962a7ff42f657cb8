"""The example-provider agentrt plugin: hook implementations only (the provider is imported on first use)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agentrt import hookimpl

if TYPE_CHECKING:
    from agentrt.provider import Provider, ProviderFactory


def make_provider(env: Mapping[str, str]) -> Provider:
    """The registered factory: the agent's environment in, a provider out (reads EXAMPLE_OLLAMA_URL)."""
    from ._provider import OllamaChatProvider, base_url_from_env

    return OllamaChatProvider(base_url_from_env(env))


@hookimpl
def agentrt_register_providers(register: Callable[[str, ProviderFactory], None]) -> None:
    """Register the ``example-ollama`` provider."""
    register("example-ollama", make_provider)
