"""``agentrt run``: one prompt to the agent CLI that the launch contract names.

Exit status: 0 the turn completed; 1 the agent reported an error (its code on
stderr); 2 a launch-contract or usage error (nothing spawned); 3 a runtime
failure (exit before result, oversize output, spawn failure, or a sink that
failed on some events: ``sink_failed``, so output is never silently missing;
``turn_timeout`` after ``--timeout``; a recorder that gave up, ``recorder_failed``,
is said on stderr but leaves the turn's status); 130 / 143 interrupted by SIGINT / SIGTERM
(the agent was stopped first).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Literal, NoReturn

import attrs
import click

from ._cli_approval import approval_options
from ._cli_sinks import sink_options
from ._run_stdout import STDOUT_PIPE_SIZE as STDOUT_PIPE_SIZE
from ._run_stdout import _StdoutSink as _StdoutSink

if TYPE_CHECKING:
    import trio

    from ._approval import Answer, ApprovalPolicy, ApprovalPrompt, Asker
    from ._conversation import Conversation
    from ._launch import LaunchSpec
    from ._plugins import Plugins
    from .dialect import Dialect
    from .events import TurnCompleted, TurnFailed
    from .sinks import Sink
    from .threads import ThreadStore

EXIT_OK = 0
EXIT_AGENT_ERROR = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3
#: The most a prompt read from stdin may hold.
MAX_STDIN_PROMPT = 16 * 1024 * 1024


def fail(code: str, message: str, status: int = EXIT_USAGE) -> NoReturn:
    """Print ``agentrt: error: <code>: <message>`` on stderr and exit."""
    click.echo(f"agentrt: error: {code}: {message}", err=True)
    sys.exit(status)


class PausingAsker:
    """An asker that asks with the terminal sink's drawing paused, so nothing repaints over the question."""

    def __init__(self, asker: Asker) -> None:
        self.asker = asker
        #: The terminal sink's ``paused`` (a :class:`~agentrt.sinks.PausableSink`), once there is one.
        self.pause: Callable[[str | None], AbstractAsyncContextManager[None]] | None = None

    async def __call__(self, prompt: ApprovalPrompt) -> Answer:
        if self.pause is None:
            return await self.asker(prompt)
        async with self.pause(prompt.request_id):
            return await self.asker(prompt)


def build_launch(
    env: Mapping[str, str], protocol: str | None, model: str | None, agent: str | None = None
) -> LaunchSpec:
    """The validated launch (named agent ``agent`` under the env, with command-line overrides); exits 2 on error."""
    from ._cli_agents import resolve_for_cli

    return resolve_for_cli(env, agent, protocol=protocol, model=model).launch


@click.command()
@click.option("-a", "--agent", help="Named agent from the config file (default: default_agent).")
@click.option("--protocol", help="Dialect to speak (overrides AWP_AGENT_CLI_PROTOCOL).")
@click.option("-m", "--model", help="Model id passed to the CLI (overrides AWP_AGENT_DEFAULT_MODEL).")
@click.option("--resume", "resume", help="Native session id to resume.")
@click.option("-c", "--continue", "continue_", is_flag=True, help="Continue the latest recorded conversation.")
@click.option("--thread", help="Named thread: resume its session and remember the new one.")
@click.option("--no-log", is_flag=True, help="Do not record this conversation in the database.")
@click.option("--json", "as_json", is_flag=True, help="Print one normalized event per line.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="End the turn with turn_timeout (exit 3) if it has no result by then.")
@approval_options
@sink_options
@click.argument("prompt", required=False)
def run(
    agent: str | None, protocol: str | None, model: str | None, resume: str | None, continue_: bool,
    thread: str | None, no_log: bool, as_json: bool, timeout: float | None, prompt: str | None,
    allow_tools: tuple[str, ...] = (), deny_tools: tuple[str, ...] = (), permission_mode: str | None = None,
    ask_timeout: float = 50.0, sinks: tuple[str, ...] = (),
) -> None:
    """Send PROMPT to the agent CLI named by -a or the launch contract and stream the reply.

    Without PROMPT, or with -, the prompt is read from stdin (when it is not a terminal).

    The CLI is a named agent of the config file, or configured by AWP_AGENT_CLI_EXECUTABLE,
    AWP_AGENT_CLI_ARGS_JSON, AWP_AGENT_CLI_ENV_JSON, AWP_AGENT_CLI_PROTOCOL and
    AWP_AGENT_DEFAULT_MODEL (these win over the file, field by field).
    """
    import trio

    from ._cli_agents import load_config_for_cli, resolve_for_cli
    from ._cli_sinks import apply_sink_choice, open_added_sinks
    from ._launch import is_valid_session_id
    from ._plugins import get_plugins
    from ._runlog import find_continuation, log_options, open_log_sink
    from .errors import AgentrtError

    env = dict(os.environ)
    prompt = _read_prompt(prompt)
    from ._protocol_mismatch import first_output_timeout

    try:
        first_output_timeout(env)  # a bad AGENTRT_FIRST_OUTPUT_TIMEOUT is a usage error: nothing spawned
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    config = load_config_for_cli(env)
    if resume is not None and not is_valid_session_id(resume):
        fail("invalid_resume_session_id", "--resume must match [A-Za-z0-9._:-]{1,256}")
    try:
        plugins = get_plugins()
        added = apply_sink_choice(plugins, sinks)
        previous = find_continuation(plugins, env, agent, config.agents) if continue_ else None
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    executable = None
    if previous is not None:
        agent, resume, thread = previous.agent, resume or previous.session_id, thread or previous.thread
        protocol = protocol or previous.protocol
        executable = None if env.get("AWP_AGENT_CLI_EXECUTABLE", "").strip() else previous.executable
    resolved = resolve_for_cli(env, agent, protocol=protocol, model=model, executable=executable, config=config)
    launch = resolved.launch
    log = None
    if not no_log and config.logs_enabled:
        log = log_options(env, resolved, thread=thread, continues=previous.conversation_id if previous else None)
    try:
        dialect = plugins.dialect(launch.protocol)
        log_sink = open_log_sink(plugins, log) if log is not None else None
        # The sinks --sink adds get the options a recorder gets: what the conversation is.
        continues = previous.conversation_id if previous else None
        extra = open_added_sinks(plugins, added, log or log_options(env, resolved, thread=thread, continues=continues))
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    store = None
    if thread is not None:
        store = plugins.thread_store(env)
        if store is None:
            fail("thread_store_unavailable", "--thread needs a thread store plugin (agentrt-sqlite)")
    from ._env_hint import launch_warning

    configured = config.agents.get(resolved.name) if resolved.name else None
    warning = launch_warning(env, launch, configured.preset if configured else None)
    if warning:
        click.echo(warning, err=True)
    sink = _StdoutSink(as_json)
    from ._cli_approval import build_approval_policy, store_recorder
    from ._ids import new_id

    conversation_id = new_id()
    asker = None
    if sys.stdin.isatty() and sys.stderr.isatty():  # mode ask asks on the terminal; elsewhere it denies
        from ._ask_terminal import TerminalAsker

        asker = PausingAsker(TerminalAsker(lambda text: click.echo(text, err=True)))
    try:
        policy = build_approval_policy(
            default_mode="deny", permission_mode=permission_mode, allow_tools=allow_tools, deny_tools=deny_tools,
            config=resolved.permissions, recorder=store_recorder(plugins, env) if log is not None else None,
            conversation_id=conversation_id, thread=thread, ask_timeout=ask_timeout, asker=asker,
            notify=lambda note: click.echo(f"agentrt: note: {note}", err=True),
            no_asker_note="stdin is not a terminal (use --allow-tool)",
        )
    except AgentrtError as exc:
        fail(exc.code, exc.detail)
    options = RunOptions(
        launch=launch, dialect=dialect, plugins=plugins, env=env, prompt=prompt, sink=sink, policy=policy,
        conversation_id=conversation_id, resume=resume, thread=thread, store=store, log_sink=log_sink,
        extra_sinks=tuple(extra), turn_timeout=timeout, asker=asker,
        first_output_timeout=resolved.first_output_timeout,
    )
    status = trio.run(_run, options)
    sys.exit(status)


def _read_prompt(prompt: str | None) -> str:
    """``prompt``, or (none given, or ``-``) the whole of stdin, bounded; exits 2 when there is none."""
    if prompt is not None and prompt != "-":
        return prompt
    stdin = sys.stdin
    if stdin is None or stdin.closed:
        fail("prompt_missing", "give PROMPT, or pipe it on stdin")
    if prompt is None and stdin.isatty():
        # A terminal would wait for Ctrl-D without saying so: `-` asks for that explicitly.
        fail("prompt_missing", "give PROMPT, or pipe it on stdin (or give - to type it, ending with Ctrl-D)")
    data = stdin.buffer.read(MAX_STDIN_PROMPT + 1)
    if len(data) > MAX_STDIN_PROMPT:
        fail("prompt_too_large", f"the prompt on stdin exceeds {MAX_STDIN_PROMPT} bytes")
    text = data.decode("utf-8", "replace")
    if not text.strip():
        fail("prompt_empty", "the prompt read from stdin is empty")
    # The trailing newline of `echo` or a here-document is not part of the question.
    return text[:-1] if text.endswith("\n") else text


@attrs.frozen(kw_only=True)
class RunOptions:
    """Everything one ``agentrt run`` turn needs, resolved and validated by the command before ``trio.run``."""

    launch: LaunchSpec
    dialect: Dialect
    plugins: Plugins
    env: Mapping[str, str]
    """The parent environment (the agent's own is built from it, never passed whole)."""
    prompt: str
    sink: _StdoutSink
    """Plain text or ``--json`` on stdout (replaced by the terminal sink on a terminal)."""
    policy: ApprovalPolicy
    conversation_id: str
    resume: str | None = None
    thread: str | None = None
    store: ThreadStore | None = None
    """Where ``thread`` is kept: given exactly when ``thread`` is."""
    log_sink: Sink | None = None
    """The recorder, unless ``--no-log`` or logs are off."""
    extra_sinks: tuple[Sink, ...] = ()
    """The sinks ``--sink`` adds."""
    turn_timeout: float | None = None
    """``--timeout``: the turn ends ``turn_timeout`` after this many seconds without a result."""
    asker: PausingAsker | None = None
    """The terminal asker (mode ``ask``), when stdin and stderr are terminals."""
    first_output_timeout: float | Literal["env"] | None = "env"
    """What ``open_conversation(first_output_timeout=...)`` gets (see :class:`~agentrt.config.ResolvedAgent`)."""

    def __attrs_post_init__(self) -> None:
        if (self.thread is None) != (self.store is None):
            raise ValueError("RunOptions: a thread needs its store, and a store its thread")


async def _run(opts: RunOptions) -> int:
    import trio

    from ._conversation import RUNTIME_FAILURE_CODES, open_conversation
    from ._launch import is_valid_session_id
    from .errors import AgentrtError
    from .events import TurnFailed
    from .threads import ThreadRecord

    launch, plugins, sink, thread, store = opts.launch, opts.plugins, opts.sink, opts.thread, opts.store
    resume, turn_timeout, policy = opts.resume, opts.turn_timeout, opts.policy
    record = None
    if thread is not None and store is not None:
        try:
            record = await store.get_thread(thread)
        except AgentrtError as exc:  # e.g. database_unavailable: the store's own code, nothing spawned
            click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
            return EXIT_USAGE
        if resume is None and record is not None and record.session_id:
            if is_valid_session_id(record.session_id):
                resume = record.session_id
            else:
                click.echo("agentrt: warning: invalid_session_id: stored session id ignored", err=True)
    # On a terminal, the terminal sink (when a plugin provides one) renders the
    # reply: live text, tool progress, a usage footer.  Elsewhere, plain text.
    try:
        terminal_sink = plugins.sink_for("terminal") if not sink.as_json and sys.stdout.isatty() else None
    except AgentrtError as exc:  # ambiguous_sink_role, duplicate_registration: a configuration error
        fail(exc.code, exc.detail)
    sinks: list[Sink] = [terminal_sink({})] if terminal_sink is not None else [sink]
    from .sinks import PausableSink

    if opts.asker is not None and isinstance(sinks[0], PausableSink):
        opts.asker.pause = sinks[0].paused  # the live status line holds still while a question is asked
    if opts.log_sink is not None:
        sinks.append(opts.log_sink)
    sinks.extend(opts.extra_sinks)

    live: list[Conversation] = []  # the conversation, once open
    timeout_message = f"no result within {turn_timeout or 0:g} s; the agent was stopped"

    async def converse() -> tuple[TurnCompleted | TurnFailed | None, str | None, dict[str, int]]:
        async with open_conversation(
            launch, plugins=plugins, dialect=opts.dialect, resume=resume, sinks=sinks, parent_env=opts.env,
            permission_policy=policy, conversation_id=opts.conversation_id,
            first_output_timeout=opts.first_output_timeout,
        ) as conv:
            # Nobody reads the reply any more once stdout is closed: stop the turn
            # (leaving the block stops and reaps the agent).
            terminal = None
            with trio.CancelScope() as reading:
                sink.on_closed = reading.cancel
                live.append(conv)
                async with trio.open_nursery() as timer:
                    if turn_timeout is not None:
                        timer.start_soon(_time_out, conv, turn_timeout, timeout_message)
                    terminal = await conv.ask(opts.prompt)
                    timer.cancel_scope.cancel()
            session_id = conv.session_id
        from ._cli_approval import close_recorder

        await close_recorder(policy)
        # Read after the block: the sinks have been flushed and closed by then.
        return terminal, session_id, conv.sink_failures

    outcome: tuple[TurnCompleted | TurnFailed | None, str | None, dict[str, int]] | None = None
    stopped_by: list[int] = []
    # The first SIGINT ends the turn through the dialect (its interrupt, a bounded wait for the
    # agent's own answer, then the stop): one turn_cancelled, then exit 130.  A second SIGINT,
    # or SIGTERM, ends it at once.  Before the turn exists, a signal cancels everything.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    stopped_by.append(signum)
                    conv = live[0] if live else None
                    if conv is None:
                        nursery.cancel_scope.cancel()
                        return
                    nursery.start_soon(_interrupt, conv, signum, len(stopped_by) > 1, nursery.cancel_scope)

            nursery.start_soon(on_signal)
            try:
                outcome = await converse()
            except AgentrtError as exc:
                click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
                return EXIT_RUNTIME
            finally:
                nursery.cancel_scope.cancel()
    if sink.output_closed:
        # Later writes to fd 1 (the interpreter's final flush) go nowhere instead of failing again.
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    if stopped_by:
        name = signal.Signals(stopped_by[0]).name
        click.echo(f"agentrt: error: interrupted: {name} received; the turn was cancelled and the agent stopped",
                   err=True)
        return 128 + stopped_by[0]
    assert outcome is not None
    terminal, session_id, sink_failures = outcome
    if thread is not None and store is not None:
        try:
            await store.save_thread(
                ThreadRecord(
                    name=thread,
                    dialect=launch.protocol,
                    executable=launch.executable,
                    model=launch.model,
                    session_id=session_id or (record.session_id if record else None),
                )
            )
        except AgentrtError as exc:  # the turn ran, but the thread could not remember it
            click.echo(f"agentrt: error: {exc.code}: {exc.detail}", err=True)
            return EXIT_RUNTIME
    if sink.output_closed:
        click.echo("agentrt: error: output_closed: stdout was closed; the agent was stopped", err=True)
        return EXIT_RUNTIME
    if sink_failures:
        # Some events never reached a sink (the warnings said which): never exit 0 with output missing.
        names = ", ".join(f"{name!r} ({count} failed)" for name, count in sink_failures.items())
        click.echo(f"agentrt: error: sink_failed: output is incomplete: {names}", err=True)
    if isinstance(terminal, TurnFailed):
        # An error line always says something: an agent may send a code and nothing else.
        message = terminal.message.strip()
        if not message or message == terminal.code:
            message = "the agent gave no reason"
        click.echo(f"agentrt: error: {terminal.code}: {message}", err=True)
        return EXIT_RUNTIME if terminal.code in RUNTIME_FAILURE_CODES else EXIT_AGENT_ERROR
    return EXIT_RUNTIME if sink_failures else EXIT_OK


async def _time_out(conv: Conversation, seconds: float, message: str) -> None:
    """``--timeout``: the turn ends with one ``turn_failed`` ``turn_timeout``; the agent is stopped at once."""
    import trio

    await trio.sleep(seconds)
    await conv.end_turn(code="turn_timeout", message=message, interrupt=False)


async def _interrupt(conv: Conversation, signum: int, again: bool, everything: trio.CancelScope) -> None:
    """End the turn for a signal: through the dialect for the first SIGINT, the stop for SIGTERM.

    A second signal while the first one's cancel still waits kills the agent's
    group at once (see :mod:`agentrt._turn_end`).
    """
    if not await conv.end_turn(interrupt=signum == signal.SIGINT and not again):
        everything.cancel()  # no turn yet (or any more): nothing to end but the run
