"""Providers: streaming model endpoints used by the reference agent.

A provider turns a :class:`ProviderRequest` (OpenAI-style messages and tool
schemas) into a stream of :class:`ProviderChunk` objects.  Providers are
registered by plugins (``agentrt_register_providers``); the OpenAI-compatible
one is the built-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol, Union

import attrs

from .events import Usage

__all__ = [
    "ToolSchema",
    "ProviderRequest",
    "TextChunk",
    "ReasoningChunk",
    "ToolCall",
    "ToolCallsChunk",
    "UsageChunk",
    "FinishChunk",
    "ProviderChunk",
    "Provider",
    "ProviderFactory",
]


@attrs.frozen(kw_only=True)
class ToolSchema:
    """A tool offered to the model (OpenAI ``function`` shape)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """One streaming request: model, messages (OpenAI chat format), tools."""

    model: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[ToolSchema] = ()
    idempotency_key: str | None = None


@attrs.frozen(kw_only=True)
class TextChunk:
    """A fragment of the reply text."""

    text: str


@attrs.frozen(kw_only=True)
class ReasoningChunk:
    """A fragment of reasoning (``reasoning_content`` / ``reasoning``)."""

    text: str


@attrs.frozen(kw_only=True)
class ToolCall:
    """A complete, validated tool call; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ToolCallsChunk:
    """The tool calls of this round, merged and validated (sent once, at the end)."""

    calls: tuple[ToolCall, ...]


@attrs.frozen(kw_only=True)
class UsageChunk:
    """Token usage of this request."""

    usage: Usage


@attrs.frozen(kw_only=True)
class FinishChunk:
    """The stream finished properly; ``reason`` as the server gave it."""

    reason: str | None


ProviderChunk = Union[TextChunk, ReasoningChunk, ToolCallsChunk, UsageChunk, FinishChunk]


class Provider(Protocol):
    """A streaming model endpoint.

    ``stream`` raises :class:`~agentrt.AgentrtError` with a stable code
    (``provider_http_429``, ``provider_stream_truncated``...) on failure.
    """

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderChunk]:
        """Stream the response to ``request``."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


ProviderFactory = Callable[[Mapping[str, str]], Provider]
"""A registered provider factory: the agent's environment in, provider out."""
