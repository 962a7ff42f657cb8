"""The example-ollama provider passes agentrt's provider conformance suite, loaded through its entry point."""

from __future__ import annotations

import functools
from typing import Any

import orjson
import trio

from agentrt import Plugins
from agentrt.testing import ReplayResponse, ScriptedReply, check_provider


def render(reply: ScriptedReply) -> ReplayResponse:
    """``reply`` as the API sends it: one JSON line per event, each its own chunk, so that it streams."""

    def line(message: dict[str, Any], **fields: Any) -> bytes:
        return orjson.dumps({"model": reply.model, "message": {"role": "assistant", **message}, **fields}) + b"\n"

    chunks = [line({"content": text}, done=False) for text in reply.text]
    if reply.tool_calls:
        calls = [{"function": {"name": c.name, "arguments": orjson.loads(c.arguments)}} for c in reply.tool_calls]
        chunks.append(line({"content": "", "tool_calls": calls}, done=False))
    if reply.complete:
        usage = {}
        if reply.usage is not None:
            usage = {"prompt_eval_count": reply.usage.input_tokens, "eval_count": reply.usage.output_tokens}
        chunks.append(line({"content": ""}, done=True, done_reason=reply.finish, **usage))
    return ReplayResponse(headers=[("content-type", "application/x-ndjson")], chunks=chunks)


def test_conformance() -> None:
    # Load it the way agentrt does: from the installed distribution's entry point.
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "example-provider"})
    factory = plugins.providers()["example-ollama"]
    trio.run(functools.partial(check_provider, factory, render=render, env=lambda url: {"EXAMPLE_OLLAMA_URL": url}))
