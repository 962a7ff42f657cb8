"""A fake Gemini API (generativelanguage ``v1beta``) on loopback, for the real Gemini CLI.

Gemini CLI reads its base URL from ``GOOGLE_GEMINI_BASE_URL`` (then it authenticates as ``gateway``, the key
from ``GEMINI_API_KEY``) and streams every model call from
``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``.  Such a call gets the reply in server-sent
events; with ``tool_command`` set, the first call of a conversation gets a ``functionCall`` of
``run_shell_command`` with that command, and the call carrying its ``functionResponse`` gets
``The tool said: <response>``.  Other calls (``generateContent``, ``countTokens``) get a small JSON answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._loopback import FakeStream, Handler, open_stream, send_json, serve

__all__ = ["TOOL", "serve_fake_gemini"]

TOOL = "run_shell_command"


def _function_response(body: dict[str, Any]) -> dict[str, Any] | None:
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    for part in last.get("parts") or () if isinstance(last, dict) else ():
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            return dict(part["functionResponse"])
    return None


def _chunk(parts: list[dict[str, Any]], finish: str | None, usage: bool) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    obj: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-fake"}
    if usage:
        obj["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    return b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"


def _on_get(state: FakeStream, handler: Handler, path: str) -> None:
    state.requests.append((handler.path, {}))
    send_json(handler, 404, b'{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}')


def _on_post(state: FakeStream, handler: Handler, path: str, body: dict[str, Any]) -> None:
    state.requests.append((handler.path, body))
    if path.endswith(":countTokens"):
        send_json(handler, 200, b'{"totalTokens":10}')
        return
    if not path.endswith(":streamGenerateContent"):
        # generateContent: side calls (routing, next-speaker checks) get a plain JSON answer.
        text = json.dumps({"next_speaker": "user", "reasoning": "done", "model_choice": "flash"})
        send_json(handler, 200, _chunk([{"text": text}], "STOP", True)[6:-4])
        return
    open_stream(handler)
    result = _function_response(body)
    if state.tool_command is not None and result is None:
        call = {"functionCall": {"name": TOOL, "args": {"command": state.tool_command}}}
        handler.wfile.write(_chunk([call], "STOP", True))
        return
    reply = state.reply
    if result is not None:
        state.tool_results.append(result)
        reply = f"The tool said: {json.dumps(result.get('response'))}"
    state.stream(handler, reply, lambda piece, last: _chunk([{"text": piece}], "STOP" if last else None, last))


@contextmanager
def serve_fake_gemini(
    reply: str = "Hello from the fake Gemini API.",
    *,
    pieces: int = 4,
    tool_command: str | None = None,
    hold: bool = False,
) -> Iterator[FakeStream]:
    """Run the fake Gemini API on 127.0.0.1 (a free port) for the block; see :class:`FakeStream`."""
    state = FakeStream(reply, pieces, tool_command, hold)
    with serve(
        state,
        lambda h, path, body: _on_post(state, h, path, body),
        lambda h, path: _on_get(state, h, path),
        on_exit=state.release,
    ):
        yield state
