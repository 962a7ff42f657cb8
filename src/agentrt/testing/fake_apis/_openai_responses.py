"""A fake OpenAI Responses API on loopback, for Codex through ``codex-acp``.

Codex reaches it as a custom model provider: ``config.toml`` in a temporary ``CODEX_HOME`` names
``model_provider`` and ``[model_providers.<id>]`` with ``base_url`` = the fake's URL + ``/v1`` and
``wire_api = "responses"`` (:func:`write_codex_home`).  Every ``POST /v1/responses`` gets the event stream
the real API sends (``response.created``, an output item, ``response.output_text.delta`` in pieces,
``response.completed`` with usage).  With ``tool_command`` set, a request with no function-call output yet
gets a ``function_call`` of Codex's shell tool (the one the request offers) running that command; the
request carrying its ``function_call_output`` gets ``The tool said: <output>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._loopback import FakeStream, Handler, open_stream, send_json, serve

__all__ = ["serve_fake_responses", "write_codex_home"]

# Codex's shell tools, newest first, and how each takes a command.
_SHELLS = ("shell_command", "exec_command", "shell")
_NOT_FOUND = b'{"error":{"message":"not found","type":"invalid_request_error"}}'
_USAGE = {
    "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15,
}  # fmt: skip


def write_codex_home(home: Path, url: str, *, model: str = "gpt-5.4", approval: str = "untrusted") -> Path:
    """A ``CODEX_HOME`` whose config sends every model call to ``url`` (the fake); returns its path.

    The key is read from ``FAKE_OPENAI_API_KEY`` (any value).
    """
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "fake"\n'
        f'approval_policy = "{approval}"\n'
        'sandbox_mode = "danger-full-access"\n'
        "check_for_update_on_startup = false\n"
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "FAKE_OPENAI_API_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    return home


def _function_output(body: dict[str, Any]) -> Any:
    for item in reversed(body.get("input") or []):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return item.get("output")
    return None


def _shell_call(body: dict[str, Any], command: str, n: int) -> dict[str, Any]:
    names = {t.get("name") for t in body.get("tools") or () if isinstance(t, dict)}
    name = next((s for s in _SHELLS if s in names), "shell")
    args: dict[str, Any] = {"command": command}
    if name == "exec_command":
        args = {"cmd": command}
    elif name == "shell":
        args = {"command": ["bash", "-lc", command]}
    return {
        "type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
        "arguments": json.dumps(args), "status": "completed",
    }  # fmt: skip


def _event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def _on_get(state: FakeStream, handler: Handler, path: str) -> None:
    state.requests.append((handler.path, {}))
    if path.endswith("/models"):
        send_json(handler, 200, b'{"object":"list","data":[],"models":[]}')
        return
    send_json(handler, 404, _NOT_FOUND)


def _on_post(state: FakeStream, handler: Handler, path: str, body: dict[str, Any]) -> None:
    state.requests.append((handler.path, body))
    if not path.endswith("/responses"):
        send_json(handler, 404, _NOT_FOUND)
        return
    open_stream(handler)
    write = handler.wfile.write
    n = len(state.requests)
    response = {"id": f"resp_{n}", "object": "response", "status": "in_progress", "model": body.get("model")}
    write(_event("response.created", response=response))
    output = _function_output(body)
    if state.tool_command is not None and output is None:
        item = _shell_call(body, state.tool_command, n)
        write(_event("response.output_item.added", output_index=0, item=item))
        write(_event("response.output_item.done", output_index=0, item=item))
        done_items = [item]
    else:
        reply = state.reply
        if output is not None:
            state.tool_results.append(output)
            reply = f"The tool said: {output if isinstance(output, str) else json.dumps(output)}"
        item_id = f"msg_{n}"
        empty = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
        write(_event("response.output_item.added", output_index=0, item=empty))
        part = {"type": "output_text", "text": "", "annotations": []}
        at = {"item_id": item_id, "output_index": 0, "content_index": 0}
        write(_event("response.content_part.added", **at, part=part))
        state.stream(handler, reply, lambda piece, last: _event("response.output_text.delta", **at, delta=piece))
        done = {**empty, "status": "completed", "content": [{**part, "text": reply}]}
        write(_event("response.output_item.done", output_index=0, item=done))
        done_items = [done]
    final = {**response, "status": "completed", "output": done_items, "usage": _USAGE}
    write(_event("response.completed", response=final))
    handler.wfile.flush()


@contextmanager
def serve_fake_responses(
    reply: str = "Hello from the fake Responses API.",
    *,
    pieces: int = 4,
    tool_command: str | None = None,
    hold: bool = False,
) -> Iterator[FakeStream]:
    """Run the fake Responses API on 127.0.0.1 (a free port) for the block; see :class:`FakeStream`."""
    state = FakeStream(reply, pieces, tool_command, hold)
    with serve(
        state,
        lambda h, path, body: _on_post(state, h, path, body),
        lambda h, path: _on_get(state, h, path),
        on_exit=state.release,
    ):
        yield state
