"""``agentrt chat``: an interactive loop over one live agent process.

Input comes from prompt_toolkit (line editing and input history that behave
the same in any terminal, tmux included; it runs in a worker thread and reads
keys in raw mode, so Ctrl-C and Ctrl-D at the prompt are keys, not signals).
During a turn the terminal is back in cooked mode and Ctrl-C is a SIGINT,
which a trio signal receiver turns into ``conv.cancel_turn()``: the turn ends
with ``turn_cancelled`` and the next prompt works.  Ctrl-D or ``/exit`` stop
the agent cleanly.  When stdin is not a terminal, lines are read plainly, and
SIGINT between turns ends the chat.  SIGTERM always ends it: the agent gets the
bounded stop, the prompt gives the terminal back, and the exit status is 143
(130 for SIGINT).  When stdout is not a terminal, the banner and the usage
footers go to stderr, so stdout holds only what the agent and the commands say.

Every chat is recorded by the ``sqlite`` sink when that plugin is installed
(``--no-log`` turns it off); ``--thread NAME`` additionally makes it a named
thread whose native session is resumed next time.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

import click
import trio

from agentrt.approval import approval_options
from agentrt.errors import AgentrtError
from agentrt.events import TurnCompleted, TurnFailed, Usage
from agentrt.sinks import apply_sink_choice, open_added_sinks, sink_options
from agentrt.threads import ThreadBrowser

HELP = """commands:
  /help    this text
  /thread  the thread name, native session id and model
  /usage   tokens used in this chat
  /exit    end the chat (also Ctrl-D)
Ctrl-C during a reply cancels that turn; the chat goes on."""


def _fail(code: str, detail: str) -> None:
    click.echo(f"agentrt: error: {code}: {detail}", err=True)
    sys.exit(2)


@click.command()
@click.option("-a", "--agent", help="Named agent from the config file (default: default_agent).")
@click.option("--thread", "thread_name", help="A named thread: resume its session, remember the new one.")
@click.option("--protocol", help="Dialect to speak (overrides AWP_AGENT_CLI_PROTOCOL).")
@click.option("-m", "--model", help="Model id passed to the CLI (overrides AWP_AGENT_DEFAULT_MODEL).")
@click.option("--no-log", is_flag=True, help="Do not record this chat in the database.")
@approval_options
@sink_options
def chat(agent: str | None, thread_name: str | None, protocol: str | None, model: str | None, no_log: bool,
         sinks: tuple[str, ...] = (), **approval: Any) -> None:
    """Talk with an agent, turn by turn, in the terminal.

    With --permission-mode ask (the default) a tool no rule decides is asked
    about: y allows once, n denies, a allows it for the rest of the chat.
    """
    from agentrt import get_plugins
    from agentrt.config import load_config

    env = dict(os.environ)
    try:
        config = load_config(env)
    except AgentrtError as exc:
        _fail(exc.code, exc.detail)
    no_log = no_log or not config.logs_enabled
    plugins = get_plugins()
    try:
        added = apply_sink_choice(plugins, sinks)
    except AgentrtError as exc:
        _fail(exc.code, exc.detail)
    store = None
    if thread_name is not None:
        store = plugins.thread_store(env)
        if store is None:
            _fail("thread_store_unavailable", "--thread needs a thread store plugin (agentrt-sqlite)")
    try:
        signum, failures, closed = trio.run(_chat, plugins, env, thread_name, store, protocol, model, no_log, agent,
                                    config, approval, added)
    except AgentrtError as exc:
        _fail(exc.code, exc.detail)
    if signum is not None:
        name = signal.Signals(signum).name
        click.echo(f"agentrt: error: interrupted: {name} received; the agent was stopped", err=True)
        sys.exit(128 + signum)
    if failures or closed:
        # As `agentrt run` does: never exit 0 when some of the chat never reached its reader.
        _quiet_stdout()
        if closed:
            click.echo("agentrt: error: output_closed: stdout was closed; the agent was stopped", err=True)
        if failures:
            names = ", ".join(f"{name!r} ({count} failed)" for name, count in failures.items())
            click.echo(f"agentrt: error: sink_failed: output is incomplete: {names}", err=True)
        sys.exit(3)


def _quiet_stdout() -> None:
    # stdout may be a pipe nobody reads any more: the interpreter's final flush
    # goes nowhere instead of failing again.
    try:
        sys.stdout.flush()
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


class _Input:
    """Reads one prompt line in a worker thread: prompt_toolkit on a terminal, plain lines otherwise."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        #: True while waiting for a line (between turns).
        self.reading = False
        # Clear while the worker thread is inside a read (the terminal may be in raw mode).
        self._idle = threading.Event()
        self._idle.set()
        self._session: Any = None
        if self.interactive:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import InMemoryHistory

            self._session = PromptSession(history=InMemoryHistory())

    def _read(self) -> str:
        self._idle.clear()
        try:
            if self._session is not None:
                text: str = self._session.prompt("› ", handle_sigint=False)
                return text
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")
        finally:
            self._idle.set()

    async def read(self) -> str:
        """The next line; ``EOFError`` on Ctrl-D / end of input, ``KeyboardInterrupt`` on Ctrl-C."""
        self.reading = True
        try:
            # Abandoned on cancellation (a signal ends the chat): a plain read holds no
            # state, and a prompt is first told to give the terminal back (stop_reading).
            return await trio.to_thread.run_sync(self._read, abandon_on_cancel=True)
        finally:
            self.reading = False

    async def stop_reading(self) -> None:
        """End a pending prompt so that the terminal leaves raw mode (bounded: 5 s)."""
        session = self._session
        if session is None:
            return
        with trio.move_on_after(5):
            while not self._idle.is_set():
                app = session.app
                loop = getattr(app, "loop", None)
                if app.is_running and loop is not None and not app.future.done():
                    loop.call_soon_threadsafe(_exit_app, app)
                # The prompt may be starting up still: ask again until the thread is out.
                await trio.to_thread.run_sync(self._idle.wait, 0.1)


def _exit_app(app: Any) -> None:
    # In prompt_toolkit's loop: a second request after the first one would raise.
    if app.is_running and not app.future.done():
        app.exit(exception=EOFError())


async def _chat(
    plugins: Any,
    env: Mapping[str, str],
    thread_name: str | None,
    store: Any,
    protocol: str | None,
    model: str | None,
    no_log: bool,
    agent: str | None = None,
    config: Any = None,
    approval: Mapping[str, Any] | None = None,
    added: tuple[str, ...] = (),
) -> tuple[int | None, dict[str, int], bool]:
    """Run the chat; returns the signal that ended it (if one did), the sinks' failure counts, and
    whether stdout's reader went away."""
    from agentrt import open_conversation
    from agentrt.config import resolve_agent

    from ._sink import TuiSink

    record = None
    if store is not None and thread_name is not None:
        if isinstance(store, ThreadBrowser):
            record, diag = await store.check_thread(thread_name)
            if diag is not None:
                click.secho(f"· {diag.code}: {diag.detail}", dim=True, err=True)
        else:
            record = await store.get_thread(thread_name)
    # An explicit -a names the agent; otherwise a thread keeps the agent it was started with.
    if record is not None and agent is None:
        protocol = protocol or record.dialect or None
        model = model or record.model
    executable = None
    if not env.get("AWP_AGENT_CLI_EXECUTABLE") and record is not None and record.executable and agent is None:
        executable = record.executable
    resolved = resolve_agent(env, agent, executable=executable, protocol=protocol, model=model, config=config)
    launch = resolved.launch
    resume = record.session_id if record is not None else None

    tui = TuiSink(sys.stdout, footer_file=None if sys.stdout.isatty() else sys.stderr)
    sinks: list[Any] = [tui]
    recorder = None if no_log else plugins.sink_for("recorder")
    options = {"env": env, "thread": thread_name, "dialect": launch.protocol, "executable": launch.executable,
               "model": launch.model, "agent": resolved.name}
    if recorder is not None:
        sinks.append(recorder(dict(options)))
    sinks.extend(open_added_sinks(plugins, added, options))  # --sink's role-less sinks
    reader = _Input()
    policy, asker = _approval_policy(plugins, env, resolved, tui, reader.interactive, no_log, thread_name,
                                     approval or {})
    async with open_conversation(launch, plugins=plugins, resume=resume, sinks=sinks,
                                 parent_env=env, permission_policy=policy,
                                 conversation_id=policy.conversation_id,
                                 first_output_timeout=resolved.first_output_timeout) as conv:
        label = f"thread {thread_name}" if thread_name else "chat"
        resumed = f", resuming {resume}" if resume else ""
        stopped_by: list[int] = []
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            # Printed once the signals are ours, so that it also says a signal will stop the chat cleanly.
            # Off a terminal the banner is not part of the output (stdout holds the replies).
            # The agent's configured name first (what the user chose it by), its dialect beside it.
            who = f"{resolved.name} ({launch.protocol})" if resolved.name else f"{launch.protocol} agent"
            click.secho(f"{label} with {who}{resumed}. /help for commands, Ctrl-D to end.",
                        dim=True, err=not sys.stdout.isatty())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_on_signals, conv, signals, reader, nursery.cancel_scope, stopped_by)
                await _loop(conv, reader, tui, store, thread_name, launch, asker)
                nursery.cancel_scope.cancel()
        await conv.stop()
    from agentrt.approval import close_recorder

    await close_recorder(policy)
    return (stopped_by[0] if stopped_by else None), conv.sink_failures, tui.output_closed


async def _on_signals(
    conv: Any, signals: Any, reader: _Input, scope: trio.CancelScope, stopped_by: list[int]
) -> None:
    """SIGINT cancels the turn through the dialect, a second one while that waits stops the agent at once (a
    no-op between turns on a terminal, so a late Ctrl-C never cancels the next turn); SIGTERM, or SIGINT at a
    plain prompt, ends the chat (leaving it stops the agent)."""
    async with trio.open_nursery() as cancels:
        async for signum in signals:
            if signum == signal.SIGINT and (reader.interactive or not reader.reading):
                # In a task of its own: a second Ctrl-C while the first cancel waits for the
                # agent's answer stops the agent at once (agentrt's cancel does that).
                cancels.start_soon(conv.cancel_turn)
                continue
            stopped_by.append(signum)
            await reader.stop_reading()
            scope.cancel()
            return


def _approval_policy(
    plugins: Any, env: Mapping[str, str], resolved: Any, tui: Any, interactive: bool, no_log: bool,
    thread_name: str | None, approval: Mapping[str, Any],
) -> tuple[Any, Any]:
    """The chat's tool-approval policy, and its terminal asker (only on a terminal)."""
    import uuid

    from agentrt.approval import TerminalAsker, build_approval_policy, store_recorder

    from ._richview import RichView

    # On a terminal the question is printed through the live view's console (it draws above the live region).
    console = tui.view.console if isinstance(tui.view, RichView) else None

    def show(text: str) -> None:
        if console is not None:
            from rich.text import Text

            console.print(Text(text, style="bold yellow"))
        else:
            click.echo(text, err=True)

    def note(text: str) -> None:
        click.echo(f"· {text}", err=True) if console is None else tui.view.note(f"· {text}")

    asker = TerminalAsker(show) if interactive else None

    async def ask_paused(prompt: Any) -> Any:
        # The live region holds still while the question is on the screen: nothing repaints over it.
        assert asker is not None
        async with tui.paused(prompt.request_id):
            return await asker(prompt)

    policy = build_approval_policy(
        default_mode="ask", permission_mode=approval.get("permission_mode"),
        allow_tools=approval.get("allow_tools", ()), deny_tools=approval.get("deny_tools", ()),
        config=resolved.permissions, asker=ask_paused if asker is not None else None,
        ask_timeout=approval.get("ask_timeout", 50.0),
        recorder=None if no_log else store_recorder(plugins, env), conversation_id=str(uuid.uuid4()),
        thread=thread_name, notify=note, no_asker_note="stdin is not a terminal",
    )
    return policy, asker


async def _loop(
    conv: Any, reader: _Input, tui: Any, store: Any, thread_name: str | None, launch: Any, asker: Any = None
) -> None:
    from agentrt.threads import ThreadRecord

    usage = Usage()
    turns = 0
    while True:
        try:
            text = await reader.read()
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line, as in a shell
        except EOFError:
            break
        text = text.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            break
        if text == "/help":
            click.echo(HELP)
            continue
        if text == "/thread":
            click.echo(f"thread: {thread_name or '-'}\nsession: {conv.session_id or '-'}\n"
                       f"model: {conv.model or '-'}")
            continue
        if text == "/usage":
            click.echo(f"turns: {turns}\ninput tokens: {usage.input_tokens or 0}\n"
                       f"output tokens: {usage.output_tokens or 0}")
            continue
        if text.startswith("/") and " " not in text:
            click.echo(f"unknown command {text}; /help lists them")
            continue
        terminal = await _turn(conv, text)
        if asker is not None:  # a question left open must not read what is typed at the prompt
            asker.cancel_pending()
        turns += 1
        if terminal.usage is not None:
            usage = usage + terminal.usage
        # Let the UI finish drawing the turn before the next prompt.
        with trio.move_on_after(5):
            await tui.wait_turns(turns)
        if store is not None and thread_name is not None and conv.session_id:
            await store.save_thread(ThreadRecord(
                name=thread_name, dialect=launch.protocol, executable=launch.executable,
                model=conv.model, session_id=conv.session_id))
        if tui.output_closed:
            break  # nobody reads the replies any more: end the chat (leaving it stops the agent)


async def _turn(conv: Any, text: str) -> TurnCompleted | TurnFailed:
    """Run one turn to its terminal event (the tui sink draws it)."""
    terminal: TurnCompleted | TurnFailed | None = None
    async for event in conv.send(text):
        if isinstance(event, (TurnCompleted, TurnFailed)):
            terminal = event
    assert terminal is not None, "a turn stream ends with its terminal event"
    return terminal
