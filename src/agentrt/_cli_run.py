"""``agentrt run``: one prompt to the agent CLI that the launch contract names.

Exit status: 0 the turn completed; 1 the agent reported an error (its code on
stderr); 2 a launch-contract or usage error (nothing spawned); 3 a runtime
failure (exit before result, oversize output, spawn failure).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

import click

EXIT_OK = 0
EXIT_AGENT_ERROR = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3


def fail(code: str, message: str, status: int = EXIT_USAGE) -> NoReturn:
    """Print ``agentrt: error: <code>: <message>`` on stderr and exit."""
    click.echo(f"agentrt: error: {code}: {message}", err=True)
    sys.exit(status)


class _StdoutSink:
    """Writes the reply to stdout: plain text, or one JSON event per line.

    Writes happen in a worker thread (stdout may be a slow pipe or terminal;
    the trio thread must not block on it).
    """

    name = "stdout"
    policy = "block"
    buffer_size = 256

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.wrote_text = False
        self.out = sys.stdout.buffer

    async def handle(self, batch: Any) -> None:
        import trio

        from .events import TextDelta, to_json

        parts: list[bytes] = []
        if self.as_json:
            import orjson

            for ev in batch.events:
                parts.append(orjson.dumps(to_json(ev)) + b"\n")
        else:
            for ev in batch.events:
                if type(ev) is TextDelta:
                    parts.append(ev.text.encode("utf-8"))
                    self.wrote_text = True
        if parts:
            data = b"".join(parts)
            await trio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    async def aclose(self) -> None:
        import trio

        if not self.as_json and self.wrote_text:
            await trio.to_thread.run_sync(self._write, b"\n")


def build_launch(env: Mapping[str, str], protocol: str | None, model: str | None) -> Any:
    """The validated launch contract, with command-line overrides; exits 2 on error."""
    from ._launch import LaunchSpec
    from .errors import AgentrtError

    try:
        return LaunchSpec.from_env(env, protocol=protocol, model=model)
    except AgentrtError as exc:
        fail(exc.code, exc.detail)


@click.command()
@click.option("--protocol", help="Dialect to speak (overrides AWP_AGENT_CLI_PROTOCOL).")
@click.option("--model", help="Model id passed to the CLI (overrides AWP_AGENT_DEFAULT_MODEL).")
@click.option("--resume", "resume", help="Native session id to resume.")
@click.option("--thread", help="Named thread: resume its session and remember the new one.")
@click.option("--json", "as_json", is_flag=True, help="Print one normalized event per line.")
@click.argument("prompt")
def run(
    protocol: str | None, model: str | None, resume: str | None, thread: str | None, as_json: bool, prompt: str
) -> None:
    """Send PROMPT to the agent CLI named by the launch contract and stream the reply.

    The CLI is configured by AWP_AGENT_CLI_EXECUTABLE, AWP_AGENT_CLI_ARGS_JSON,
    AWP_AGENT_CLI_ENV_JSON, AWP_AGENT_CLI_PROTOCOL and AWP_AGENT_DEFAULT_MODEL.
    """
    import trio

    from ._launch import is_valid_session_id
    from ._plugins import get_plugins
    from .errors import AgentrtError

    env = dict(os.environ)
    launch = build_launch(env, protocol, model)
    if resume is not None and not is_valid_session_id(resume):
        fail("invalid_resume_session_id", "--resume must match [A-Za-z0-9._:-]{1,256}")
    try:
        plugins = get_plugins()
        dialect = plugins.dialect(launch.protocol)
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    store = None
    if thread is not None:
        store = plugins.thread_store(env)
        if store is None:
            fail("thread_store_unavailable", "--thread needs a thread store plugin (agentrt-sqlite)")
    sink = _StdoutSink(as_json)
    status = trio.run(_run, launch, dialect, plugins, env, resume, thread, store, sink, prompt)
    sys.exit(status)


async def _run(
    launch: Any,
    dialect: Any,
    plugins: Any,
    env: dict[str, str],
    resume: str | None,
    thread: str | None,
    store: Any,
    sink: _StdoutSink,
    prompt: str,
) -> int:
    from ._conversation import RUNTIME_FAILURE_CODES, open_conversation
    from ._launch import is_valid_session_id
    from .errors import AgentrtError
    from .events import TurnFailed
    from .threads import ThreadRecord

    record = None
    if thread is not None:
        record = await store.get_thread(thread)
        if resume is None and record is not None and record.session_id:
            if is_valid_session_id(record.session_id):
                resume = record.session_id
            else:
                click.echo("agentrt: warning: invalid_session_id: stored session id ignored", err=True)
    # On a terminal, the terminal sink (when a plugin provides one) renders the
    # reply: live text, tool progress, a usage footer.  Elsewhere, plain text.
    try:
        terminal_sink = plugins.sink_for("terminal") if not sink.as_json and sys.stdout.isatty() else None
        recorder = plugins.sink_for("recorder") if thread is not None else None
    except AgentrtError as exc:  # ambiguous_sink_role, duplicate_registration: a configuration error
        fail(exc.code, exc.detail)
    sinks: list[Any] = [terminal_sink({})] if terminal_sink is not None else [sink]
    if recorder is not None:
        sinks.append(recorder({"env": env, "thread": thread}))
    try:
        async with open_conversation(
            launch, plugins=plugins, dialect=dialect, resume=resume, sinks=sinks, parent_env=env
        ) as conv:
            terminal = await conv.ask(prompt)
            session_id = conv.session_id
    except AgentrtError as exc:
        click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
        return EXIT_RUNTIME
    if thread is not None:
        await store.save_thread(
            ThreadRecord(
                name=thread,
                dialect=launch.protocol,
                executable=launch.executable,
                model=launch.model,
                session_id=session_id or (record.session_id if record else None),
            )
        )
    if isinstance(terminal, TurnFailed):
        click.echo(f"agentrt: error: {terminal.code}: {terminal.message}", err=True)
        return EXIT_RUNTIME if terminal.code in RUNTIME_FAILURE_CODES else EXIT_AGENT_ERROR
    return EXIT_OK
