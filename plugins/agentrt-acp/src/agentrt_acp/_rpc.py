"""ACP's JSON-RPC vocabulary on the host side: versions, stop reasons, error codes, usage, encoding."""

from __future__ import annotations

from typing import Any

import orjson

from agentrt.errors import AgentrtError
from agentrt.events import Usage

__all__ = [
    "PROTOCOL_VERSION", "STOP_REASON_CODES", "dumps", "meta_usage", "rpc_error_code", "rpc_message", "usage_of",
]  # fmt: skip

#: The ACP protocol version agentrt speaks.
PROTOCOL_VERSION = 1

#: ``stopReason`` values that fail the turn, with their code (``end_turn`` completes it).
STOP_REASON_CODES = {
    "max_tokens": "max_tokens",
    "max_turn_requests": "max_turn_requests",
    "refusal": "refusal",
    "cancelled": "turn_cancelled",
}

_RPC_CODES = {
    -32700: "rpc_parse_error",
    -32600: "rpc_invalid_request",
    -32601: "rpc_method_not_found",
    -32602: "rpc_invalid_params",
    -32603: "rpc_internal_error",
    -32000: "acp_auth_required",
    -32002: "resource_not_found",
}


def rpc_error_code(error: Any) -> str:
    """The stable agentrt code for a JSON-RPC error object (``rpc_error`` when unknown)."""
    code = error.get("code") if isinstance(error, dict) else None
    return _RPC_CODES.get(code, "rpc_error") if isinstance(code, int) else "rpc_error"


def rpc_message(error: Any) -> str:
    """The error's message (a generic one when the agent gave none), with its ``data`` reason when it has one.

    Agents put the reason in ``data``: a string, or ``details``/``message`` in
    an object (Gemini CLI: ``Internal error`` with ``data.details`` "No previous
    sessions found for this project.").  Bounded to 500 characters.
    """
    message = error.get("message") if isinstance(error, dict) else None
    text = message if isinstance(message, str) and message else "the agent answered with an error"
    data = error.get("data") if isinstance(error, dict) else None
    reason = data if isinstance(data, str) else None
    if isinstance(data, dict):
        reason = next((v for k in ("details", "message") if isinstance(v := data.get(k), str) and v), None)
    if reason and reason not in text:
        text = f"{text}: {reason}"
    return text if len(text) <= 500 else text[:497] + "..."


def usage_of(data: Any) -> Usage | None:
    """ACP's usage object as agentrt's :class:`~agentrt.events.Usage` (None when absent)."""
    if not isinstance(data, dict):
        return None

    def num(key: str) -> int | None:
        v = data.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return Usage(
        input_tokens=num("inputTokens"),
        output_tokens=num("outputTokens"),
        cache_read_input_tokens=num("cachedReadTokens"),
        cache_creation_input_tokens=num("cachedWriteTokens"),
    )


def meta_usage(meta: Any) -> Usage | None:
    """Usage an agent puts in a response's ``_meta`` (Gemini CLI: ``quota.token_count``), else ``None``.

    ``_meta`` is free-form: only integer ``input_tokens``/``output_tokens`` are read.
    """
    quota = meta.get("quota") if isinstance(meta, dict) else None
    counts = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(counts, dict):
        return None

    def num(key: str) -> int | None:
        v = counts.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    usage = Usage(input_tokens=num("input_tokens"), output_tokens=num("output_tokens"))
    return None if usage.input_tokens is None and usage.output_tokens is None else usage


def dumps(obj: Any) -> bytes:
    """One JSON-RPC message as a line."""
    try:
        return orjson.dumps(obj) + b"\n"
    except TypeError as exc:  # text that is not valid Unicode (a lone surrogate)
        raise AgentrtError("unsupported_content_block", f"content is not valid JSON text: {exc}") from None
