"""``agentrt demo``: the whole chain, offline.

local model server (supervised child) ← HTTP ← ``agentrt agent`` (child, awp-jsonl)
← agentrt's conversation (this process) → the terminal.

Gemma 3 270M as packaged is a *base* model: it continues documents, it does
not follow chat turns.  The server frames the conversation as a document
(llama-cpp-python's ``snoozy`` format: ``### Prompt: ...`` / ``### Response:``,
stop at ``###``) and the demo supplies a short preamble as the system prompt,
so the model's most likely continuation is an answer.  Expect short, often
wrong answers: it is a demonstration of the plumbing, not of a model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.errors import AgentrtError
from agentrt.events import TextDelta, TurnCompleted, TurnFailed

from ._server import find_gguf, serve_local_model, server_env

__all__ = ["run_demo", "DEFAULT_PROMPT", "FRAME", "agent_launch", "run_chain"]

DEFAULT_PROMPT = "What is the capital of France?"
#: The document preamble a base model continues (the first lines of the frame).
FRAME = (
    "Questions and their short, correct answers.\n"
    "### Prompt: What is the capital of Japan?\n"
    "### Response: The capital of Japan is Tokyo.\n"
    "### Prompt: How many days are in a week?\n"
    "### Response: A week has seven days."
)
#: Model id the server is started with.
MODEL_ALIAS = "gemma-3-270m"
_PASSTHROUGH = ("AGENTRT_STATE_DIR", "AGENTRT_API_TOKEN", "AGENTRT_TIMEOUT_MS", "AGENTRT_REMOTE_API_OPT_IN")


def _agent_executable() -> tuple[str, tuple[str, ...]]:
    """How to start ``agentrt agent``: the console script beside this interpreter, else ``-c``."""
    script = os.path.join(os.path.dirname(sys.executable), "agentrt")
    if os.path.isfile(script) and not os.path.islink(script):
        return script, ("agent",)
    return os.path.realpath(sys.executable), ("-c", "from agentrt.cli import main; main()", "agent")


def agent_launch(
    base_url: str, model: str, env: Mapping[str, str], command: tuple[str, tuple[str, ...]] | None = None
) -> LaunchSpec:
    """The launch of the reference agent against ``base_url`` (``command``: executable and prefix)."""
    executable, prefix = command or _agent_executable()
    entries = {"AGENTRT_API_BASE_URL": base_url, "AGENTRT_MODEL": model}
    entries["AGENTRT_SYSTEM_PROMPT"] = env.get("AGENTRT_SYSTEM_PROMPT", FRAME)
    for key in _PASSTHROUGH:
        if env.get(key):
            entries[key] = env[key]
    return LaunchSpec(
        executable=executable,
        prefix_args=prefix,
        env_entries=entries,
        protocol="awp-jsonl",
        model=model,
        remote_opt_in=env.get("AGENTRT_REMOTE_API_OPT_IN") == "1",
    )


async def _write(text: str) -> None:
    def write() -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    await trio.to_thread.run_sync(write)


async def run_chain(
    prompt: str, launch: LaunchSpec, env: Mapping[str, str], resume: str | None = None
) -> tuple[TurnCompleted | TurnFailed, str | None]:
    """One turn through agentrt hosting the agent; deltas go to stdout as they come."""
    terminal: TurnCompleted | TurnFailed | None = None
    last = "\n"
    async with open_conversation(launch, parent_env=env, resume=resume) as conv:
        async for event in conv.send(prompt):
            if isinstance(event, TextDelta) and event.text:
                await _write(event.text)
                last = event.text[-1]
            elif isinstance(event, TurnCompleted | TurnFailed):
                terminal = event
        session_id = conv.session_id
    if last != "\n":
        await _write("\n")
    assert terminal is not None
    return terminal, session_id


async def _main(prompt: str, resume: str | None, python: str | None, gguf: str | None) -> int:
    env = dict(os.environ)
    started: str | None = None
    crashed: str | None = None
    async with AsyncExitStack() as stack:
        base_url = env.get("AGENTRT_API_BASE_URL", "").strip()
        if base_url:
            model = env.get("AGENTRT_MODEL", "").strip() or MODEL_ALIAS
        else:
            interpreter = python or sys.executable
            path = gguf or await find_gguf(interpreter, server_env(env))
            _err("starting the local model server (first start loads the model)...")
            server = await stack.enter_async_context(serve_local_model(interpreter, path, env, MODEL_ALIAS))
            started = server.base_url
            base_url, model = server.base_url, server.model
        command = await trio.to_thread.run_sync(_agent_executable)
        launch = agent_launch(base_url, model, env, command)
        terminal, session_id = await run_chain(prompt, launch, env, resume)
        if started is not None:
            status = server.process.exit_status
            if status is not None and not status.requested:
                # A failed turn then says only that the stream broke; say why.
                how = f"signal {status.signal}" if status.signal is not None else f"exit code {status.returncode}"
                crashed = how
    if crashed is not None:
        _err(
            f"the local model server crashed ({crashed}); a llama-cpp-python built for this CPU can do that on "
            "some VMs: reinstall it with CMAKE_ARGS=-DGGML_NATIVE=OFF pip install --no-cache-dir --force-reinstall "
            "'llama-cpp-python[server]'"
        )
    if started is not None:
        _err(f"stopped the local model server at {started}")
    if session_id:
        _err(f"session {session_id} (continue with: agentrt demo --resume {session_id} PROMPT)")
    if isinstance(terminal, TurnFailed):
        _err(f"the turn failed: {terminal.code}")
        return 1
    return 0


def _err(message: str) -> None:
    print(f"agentrt demo: {message}", file=sys.stderr, flush=True)


def run_demo(
    prompt: str | None, *, resume: str | None = None, python: str | None = None, gguf: str | None = None
) -> int:
    """Run the demo; return the exit status."""
    try:
        return trio.run(_main, prompt or DEFAULT_PROMPT, resume, python, gguf)
    except AgentrtError as exc:
        _err(f"{exc.code}: {exc.detail}")
        return 1
    except KeyboardInterrupt:
        return 130
