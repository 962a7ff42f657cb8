"""The bridge: be an agent CLI in one dialect while hosting another CLI in its own.

``agentrt bridge --to awp-jsonl`` reads turns on its stdin in the outer dialect,
sends each to the hosted CLI (the launch contract names it, e.g. Claude Code
over stream-json) through a :class:`~agentrt.Conversation`, and writes every
event of the turn back in the outer dialect.  The inner conversation enforces
the turn rules, so the outer host sees exactly one terminal event per turn;
session ids, tool progress and usage are carried across by the codecs;
diagnostics go to stderr, never to the protocol stream.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs
import orjson
import trio

from ._bridge_ask import AskTheClient
from ._bridge_cancel import TurnCancels
from ._bridge_sessions import HostedConversation, SessionSwitch, session_thread
from .errors import AgentrtError
from .threads import AsyncClosable

__all__ = ["BridgeArgs", "parse_bridge_args", "serve_bridge"]

_OVERRIDE = re.compile(r"^(AWP_AGENT_[A-Z0-9_]+|AGENTRT_CONFIG)=(.*)$", re.DOTALL)
_IGNORED_FLAGS = {"--print", "--verbose"}
_IGNORED_WITH_VALUE = {"--input-format", "--output-format", "--mcp-config"}
# Claude Code settings files name nothing the hosted CLI reads (the Agent SDK passes this one).
_IGNORED_PREFIXES = ("--setting-sources=",)
_QUEUED_TURNS = 16  # turns read ahead while one runs; more waits (stops reading) until one starts


@attrs.frozen(kw_only=True)
class BridgeArgs:
    """What the bridge's own argv says."""

    to: str = "awp-jsonl"
    model: str | None = None
    resume: str | None = None
    agent: str | None = None
    overrides: Mapping[str, str] = attrs.field(factory=dict)
    permission_prompt_tool: str | None = None
    """``stdio`` when the host answers tool permission requests itself (stream-json ``can_use_tool``)."""
    partial_messages: bool = False
    """``--include-partial-messages``: stream each delta (stream-json)."""


def parse_bridge_args(argv: Sequence[str]) -> BridgeArgs:
    """Parse ``--to D``, ``--model M``, ``--resume ID``, ``-a/--agent NAME`` and ``AWP_AGENT_*=V`` overrides.

    The host appends ``--model``/``--resume``/``--mcp-config`` after the prefix
    arguments, so they are accepted anywhere, before or after ``--``.  The
    flags the Claude Agent SDK passes a CLI are accepted too:
    ``--permission-prompt-tool stdio``, ``--include-partial-messages``, an
    empty ``--system-prompt`` and ``--setting-sources=...``.  Any other
    argument (or a system prompt the bridge cannot give the hosted CLI) is
    ``unsupported_argument:<arg>``.
    """
    to = "awp-jsonl"
    model = resume = agent = prompt_tool = None
    partial = False
    overrides: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        if arg == "--":
            continue
        if arg == "--include-partial-messages":
            partial = True
            continue
        if arg in ("--permission-prompt-tool", "--system-prompt"):
            value = next(it, None)
            if value is None:
                raise AgentrtError(f"missing_argument_value:{arg}", f"{arg} needs a value")
            if arg == "--permission-prompt-tool" and value == "stdio":
                prompt_tool = value
            elif arg != "--system-prompt" or value:
                raise AgentrtError(f"unsupported_argument:{arg}", f"the bridge does not support this {arg}")
            continue
        if arg.startswith(_IGNORED_PREFIXES):
            continue
        if arg in ("--to", "--model", "--resume", "-a", "--agent") or arg in _IGNORED_WITH_VALUE:
            value = next(it, None)
            if value is None:
                raise AgentrtError(f"missing_argument_value:{arg}", f"{arg} needs a value")
            if arg == "--to":
                to = value
            elif arg == "--model":
                model = value
            elif arg == "--resume":
                resume = value
            elif arg in ("-a", "--agent"):
                agent = value
            continue
        if arg in _IGNORED_FLAGS:
            continue
        match = _OVERRIDE.match(arg)
        if match:
            overrides[match.group(1)] = match.group(2)
            continue
        raise AgentrtError(f"unsupported_argument:{arg[:64]}", "unknown bridge argument")
    return BridgeArgs(
        to=to, model=model, resume=resume, agent=agent, overrides=overrides,
        permission_prompt_tool=prompt_tool, partial_messages=partial,
    )  # fmt: skip


def _line(obj: Mapping[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _warn(code: str, detail: str) -> None:
    print(f"agentrt bridge: {code}: {detail[:300]}", file=sys.stderr, flush=True)


#: Model names a hosted CLI takes besides the configured one (Claude Code's ``--model`` aliases).
_MODEL_ALIASES = {"stream-json": ("sonnet", "opus", "haiku")}


#: Modes a hosted CLI takes at start (Claude Code's ``--permission-mode``); only those that keep agentrt's
#: approval in charge: ``acceptEdits`` and ``bypassPermissions`` would let the CLI act without asking.
_MODES = {
    "stream-json": (
        ("default", "Default", "Tools ask agentrt's approval policy"),
        ("plan", "Plan", "Read-only: the CLI plans and changes nothing"),
    )
}


def _offer(options: Any, launch: Any) -> None:
    """What an ACP client may pick per session: the configured model and the CLI's aliases, the CLI's modes."""
    if launch.model:
        options.models = tuple(dict.fromkeys((launch.model, *_MODEL_ALIASES.get(launch.protocol, ()))))
        options.current_model = launch.model
    if "--permission-mode" not in launch.prefix_args and launch.protocol in _MODES:
        options.modes, options.current_mode = _MODES[launch.protocol], "default"


def _hosting(plugins: Any, launch: Any, outer: Any, env: Mapping[str, str], first_output: Any) -> Any:
    """The hosted ACP agent's session handling (:class:`HostedAgent`), when the bridge hosts one for an ACP client."""
    from ._bridge_hosted import HostedAgent, can_open_early
    from ._codec_capabilities import DefersNewSessions

    if not isinstance(outer, DefersNewSessions) or not can_open_early(plugins.dialect(launch.protocol)):
        return None
    if first_output == "env":
        from ._protocol_mismatch import first_output_timeout

        first_output = first_output_timeout(env)
    outer.defer_new = True
    return HostedAgent(outer, first_output)


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # an empty async iterator: the hosted CLI never started


def _recorder(plugins: Any, env: Mapping[str, str], resolved: Any) -> Callable[[Any, str | None], Awaitable[None]]:
    """Attach the ``recorder`` sink (``agentrt logs``) to a conversation, as ``run`` records its own."""
    from ._config import load_config
    from ._runlog import log_options, open_log_sink

    async def record(conv: Any, thread: str | None) -> None:
        if not load_config(env).logs_enabled:
            return
        try:
            sink = open_log_sink(plugins, log_options(env, resolved, thread=thread, continues=None))
        except AgentrtError as exc:  # a bad database setting: the bridge works on, unrecorded
            _warn(exc.code, exc.detail)
            return
        if sink is not None:
            await conv.attach(sink)

    return record


async def serve_bridge(args: BridgeArgs, env: Mapping[str, str], plugins: Any, source: Any, sink: Any) -> int:
    """Run the bridge on ``source``/``sink`` (byte streams); returns the exit status.

    Input is read while a turn runs: an interrupt (ACP ``session/cancel``)
    cancels the inner turn, and when the outer dialect can ask its client for
    permissions, the hosted CLI's tool requests are forwarded to it.  Turns run
    one at a time, in order.
    """
    from ._bridge_policy import approval_recorder, bridge_policy
    from ._conversation import Conversation, open_conversation
    from ._launch import is_valid_session_id
    from ._resolve_agent import resolve_agent
    from .agent._io import Oversized, read_lines
    from .dialect import AsksPermission, InputError, Interrupt, OpensSessions, PartialMessages, Shutdown, Turn
    from .events import Diagnostic, TurnFailed

    outer = plugins.dialect(args.to).agent_codec()
    if args.partial_messages and isinstance(outer, PartialMessages):
        outer.partial = True
    inner_env = {**env, **args.overrides}
    resolved = resolve_agent(inner_env, args.agent, model=args.model)
    launch = resolved.launch
    if args.resume is not None and not is_valid_session_id(args.resume):
        raise AgentrtError("invalid_resume_session_id", "--resume must match [A-Za-z0-9._:-]{1,256}")
    writing = trio.Lock()  # the reader and the turn runner both write

    async def send_objs(objs: Sequence[Mapping[str, Any]]) -> None:
        if objs:
            async with writing:
                await sink.send_all(b"".join(_line(o) for o in objs))

    async def emit(event: Any) -> None:
        await send_objs(outer.encode(event))

    can_ask = isinstance(outer, AsksPermission) and (
        not outer.asks_only_when_told or args.permission_prompt_tool == "stdio"
    )
    asking = AskTheClient(outer, send_objs) if can_ask else None
    # The named agent's own rules bind here too; what they leave open goes to the client (or the default).
    approvals = approval_recorder(plugins, inner_env, _warn)

    def where() -> tuple[str | None, str | None]:
        conv = hosted.conv
        return (conv.id if conv is not None else None), hosted.thread

    policy = bridge_policy(
        resolved.permissions, asking if asking is not None else plugins.permission_policy(),
        recorder=approvals, where=where,
    )  # fmt: skip
    items_in, items_out = trio.open_memory_channel[Any](_QUEUED_TURNS)  # turns and session switches, in order
    cancels = TurnCancels()
    sessions = outer if isinstance(outer, OpensSessions) else None
    if sessions is not None:
        sessions.load_sessions = True  # session/load: the hosted CLI's own resume (HostedConversation)
    take_opened = sessions.take_opened if sessions is not None else None

    offered = sessions.options if sessions is not None else None
    hosting = _hosting(plugins, launch, outer, inner_env, resolved.first_output_timeout)
    if offered is not None and hosting is None:
        _offer(offered, launch)

    def open_inner(resume: str | None, model: str | None, mode: str | None, cwd: str | None) -> Any:
        spec = attrs.evolve(launch, model=model) if model else launch
        if mode and mode != "default":
            spec = attrs.evolve(spec, prefix_args=(*spec.prefix_args, "--permission-mode", mode))
        return open_conversation(
            spec, plugins=plugins, resume=resume, cwd=cwd, parent_env=inner_env, permission_policy=policy,
            first_output_timeout=resolved.first_output_timeout,
        )

    async def answer_load(switch: SessionSwitch, error: str | None) -> None:
        replay = sessions.replay if sessions is not None else None
        if switch.kind == "load" and error is None and replay is not None:  # the history first (ACP)
            from ._bridge_replay import replay_history

            await replay_history(
                partial(plugins.thread_store, inner_env), session_thread(switch.client_session),
                partial(replay, switch.client_session), send_objs,
            )  # fmt: skip
        if switch.kind != "new" or switch.request_id is not None:
            value = {"mode": switch.mode, "new": switch.client_session}.get(switch.kind, switch.model)
            await send_objs(outer.answer_switch(switch.kind, switch.request_id, error, value))

    hosted = HostedConversation(
        open_inner, resume=args.resume, store=lambda: plugins.thread_store(inner_env),
        record=_recorder(plugins, inner_env, resolved), answer=answer_load, sessions=take_opened is not None,
        prepare=hosting.prepare if hosting is not None else None,
        forward=partial(hosting.forward, send_objs) if hosting is not None else None,
    )  # fmt: skip

    async def run_turn(conv: Conversation, item: tuple[int, Turn], nursery: trio.Nursery) -> None:
        number, turn = item
        if cancels.wanted(number):  # cancelled while it waited: it never reaches the CLI
            await emit(TurnFailed(code="turn_cancelled", message="the prompt was cancelled before it started"))
            return
        try:
            async for event in conv.send(turn):
                if cancels.started(number):  # now the conversation's current turn
                    nursery.start_soon(cancel, number)
                if isinstance(event, Diagnostic):
                    _warn(event.code, event.detail)
                await emit(event)
        except AgentrtError as exc:
            await emit(TurnFailed(code=exc.code, message=exc.detail))
        finally:
            cancels.ended(number)
        if asking is not None:
            asking.release_all("the turn ended")

    async def cancel(number: int) -> None:
        conv = hosted.conv
        if conv is None or not cancels.is_running(number):  # a late cancel never touches a later turn
            return
        await conv.cancel_turn()
        if asking is not None:
            asking.release_all("the prompt was cancelled")

    shutdown = False
    async with trio.open_nursery() as nursery:
        opened = await nursery.start(hosted.run, items_out, partial(run_turn, nursery=nursery))
        async with items_in:
            async for raw in read_lines(source) if opened else _nothing():
                if isinstance(raw, Oversized):
                    await emit(TurnFailed(code="input_message_oversize", message="input line too large"))
                    continue
                if not raw.strip():
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    await emit(TurnFailed(code="invalid_input_json", message="input line is not JSON"))
                    continue
                if asking is not None and asking.take(obj):
                    continue
                decoded = outer.decode_input(obj)
                # Answers the outer protocol wants now (a request/response handshake).
                await send_objs(outer.drain_output())
                for kind, rid, client_session, value, cwd in take_opened() if take_opened is not None else ():
                    if kind == "option":
                        await items_in.send(SessionSwitch(kind, rid, client_session, option=value))
                        continue
                    mode, model = (value, None) if kind == "mode" else (None, value)
                    await items_in.send(SessionSwitch(kind, rid, client_session, model, mode, cwd))
                if decoded is None:
                    continue
                if isinstance(decoded, Shutdown):
                    shutdown = True
                    break
                if isinstance(decoded, InputError):
                    await emit(TurnFailed(code=decoded.code, message=decoded.detail))
                elif isinstance(decoded, Interrupt):
                    target = cancels.request()  # duplicates coalesce: one cancel per turn
                    if target is not None:
                        nursery.start_soon(cancel, target)
                else:
                    assert isinstance(decoded, Turn)
                    await items_in.send((cancels.accept(), decoded))
        if asking is not None:  # nobody is left to answer; queued turns still run
            asking.close()
        if opened and not shutdown and outer.cancel_on_close and hosted.conv is not None:
            # A connection-like protocol (ACP): its client is gone, so the running turn has no reader.
            await hosted.conv.cancel_turn()
    if isinstance(approvals, types.MethodType) and isinstance(approvals.__self__, AsyncClosable):
        with trio.CancelScope(shield=True), trio.move_on_after(10):  # the recorder's store
            await approvals.__self__.aclose()
    if hosted.startup_error is not None:
        raise hosted.startup_error
    return 0
