"""``agentrt demo``: the whole chain, offline.

local model server (supervised child) ← HTTP ← ``agentrt agent`` (child, awp-jsonl)
← agentrt's conversation (this process) → the terminal.

Gemma 3 270M as packaged is a *base* model: it continues documents, it does
not follow chat turns.  The server renders the conversation as a question and
answer document (``Q: …`` / ``A: …``, greedy, stopping at the end of the
answer's line, see :mod:`._serve`) and the demo supplies worked examples as
the system prompt, so the model's most likely continuation is a short answer.
It answers simple questions, not all of them right: it demonstrates the
plumbing, not a model.
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

from ._server import ModelFile, find_gguf, serve_local_model, server_env

__all__ = ["run_demo", "DEFAULT_PROMPT", "FRAME", "agent_launch", "run_chain"]

DEFAULT_PROMPT = "What is the capital of France?"
#: The document preamble a base model continues (the first lines of the frame).
FRAME = (
    "Questions and their short, correct answers.\n\n"
    "Q: What is the capital of Japan?\nA: Tokyo.\n\n"
    "Q: What is 5 + 3?\nA: 8.\n\n"
    "Q: What is 4 times 2?\nA: 8.\n\n"
    "Q: Translate 'house' to German.\nA: Haus.\n\n"
    "Q: Translate 'water' to Spanish.\nA: Agua.\n\n"
    "Q: What color is snow?\nA: White.\n\n"
    "Q: How many wheels does a bicycle have?\nA: Two.\n\n"
    "Q: Who wrote Hamlet?\nA: William Shakespeare."
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


class _Trimmed:
    """The reply's text as it streams, trimmed: no leading or trailing whitespace, one final newline.

    Whitespace is held back until text follows it, so a reply that ends in
    spaces or blank lines prints none of them.
    """

    def __init__(self) -> None:
        self.started = False
        self.held = ""

    def feed(self, text: str) -> str:
        """What to print now for ``text``."""
        if not self.started:
            text = text.lstrip()
            if not text:
                return ""
            self.started = True
        body = text.rstrip()
        out = self.held + body if body else ""
        self.held = text[len(body) :] if body else self.held + text
        return out

    def end(self) -> str:
        """What ends the reply: a newline after any text."""
        return "\n" if self.started else ""


async def run_chain(
    prompt: str, launch: LaunchSpec, env: Mapping[str, str], resume: str | None = None
) -> tuple[TurnCompleted | TurnFailed, str | None]:
    """One turn through agentrt hosting the agent; the reply goes to stdout as it comes, trimmed."""
    terminal: TurnCompleted | TurnFailed | None = None
    reply = _Trimmed()
    async with open_conversation(launch, parent_env=env, resume=resume) as conv:
        async for event in conv.send(prompt):
            if isinstance(event, TextDelta) and event.text:
                text = reply.feed(event.text)
                if text:
                    await _write(text)
            elif isinstance(event, TurnCompleted | TurnFailed):
                terminal = event
        session_id = conv.session_id
    await _write(reply.end())
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
            found = ModelFile(path=gguf, first=False) if gguf else await find_gguf(interpreter, server_env(env))
            first = " (first start: the model file was just assembled, loading it takes longer)" if found.first else ""
            _say(f"starting the local model server{first}...")
            server = await stack.enter_async_context(serve_local_model(interpreter, found.path, env, MODEL_ALIAS))
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
        _err("local_model_server_crashed", f"the local model server ended by itself ({crashed})")
    if started is not None:
        _say(f"stopped the local model server at {started}")
    if session_id:
        _say(f"session {session_id} (continue with: agentrt demo --resume {session_id} PROMPT)")
    if isinstance(terminal, TurnFailed):
        _err(terminal.code, terminal.message or "the turn failed")
        return 1
    return 0


def _say(message: str) -> None:
    print(f"agentrt demo: {message}", file=sys.stderr, flush=True)


def _err(code: str, detail: str) -> None:
    # The same form as every other agentrt command's errors.
    print(f"agentrt: error: {code}: {detail}", file=sys.stderr, flush=True)


def _first_agentrt_error(group: BaseExceptionGroup[BaseException]) -> AgentrtError | None:
    for exc in group.exceptions:
        if isinstance(exc, AgentrtError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_agentrt_error(exc)
            if found is not None:
                return found
    return None


def run_demo(
    prompt: str | None, *, resume: str | None = None, python: str | None = None, gguf: str | None = None
) -> int:
    """Run the demo; return the exit status."""
    try:
        return trio.run(_main, prompt or DEFAULT_PROMPT, resume, python, gguf)
    except AgentrtError as exc:
        _err(exc.code, exc.detail)
        return 1
    except BaseExceptionGroup as group:
        # An error raised inside the server's nursery arrives wrapped.
        found = _first_agentrt_error(group)
        if found is None:
            raise
        _err(found.code, found.detail)
        return 1
    except KeyboardInterrupt:
        return 130
