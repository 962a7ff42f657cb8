"""The ``agentrt agent`` process: startup checks, then one turn per input line.

Startup follows the original reference agent's order (arguments → dialect →
model → provider endpoint and token → tools → timeout → state directory →
session → system prompt); the first failure prints exactly one
``{"type":"result","subtype":"startup_error","is_error":true,"result":<code>}``
line and the process exits 1.  After that nothing is printed until the first
valid user turn, which opens with the dialect's init event.

Turns are strictly sequential: a line read while a turn runs waits until the
turn has printed its result, so what is printed, and in which order, is what
a loop reading one line per turn would print.  Input is read meanwhile only so
that control traffic is answered at once: a stream-json ``interrupt`` ends the
running turn with ``turn_interrupted`` (its partial reply is kept in the
session).  ``{"type":"shutdown"}``, end of input and SIGTERM all end the
process cleanly with status 0.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import trio

from .._framing import encode_line
from .._startup_error import dialect_in_argv, report_startup_error
from ..dialect import (
    AgentCodec,
    DocumentBlock,
    ImageBlock,
    InputError,
    Interrupt,
    PartialMessages,
    Shutdown,
    TextBlock,
    Turn,
)
from ..errors import AgentrtError
from ..events import SessionStarted, TurnCompleted, TurnFailed
from ..provider import Provider
from ..tools import Tool
from . import _history, _settings
from ._io import ByteSink, ByteSource, Oversized, read_lines
from ._loop import public_code, public_reason, run_turn
from ._printer import Printer

__all__ = ["serve", "startup_error_line", "DOCUMENT_FALLBACK"]

DOCUMENT_FALLBACK = "[A document attachment was supplied but this reference adapter does not decode PDFs.]"
_CLOSE_TIMEOUT = 5.0
#: Input lines read ahead while a turn runs (beyond this, reading waits for the turn).
_READ_AHEAD = 256


def startup_error_line(code: str, message: str = "") -> bytes:
    """The one line printed when the agent cannot start (``message``: why, in ``errors``)."""
    line: dict[str, Any] = {"type": "result", "subtype": "startup_error", "is_error": True, "result": code}
    if message:
        line["errors"] = [message]
    return encode_line(line)


def _log(message: str) -> None:
    # stderr is for people; the codes printed here never carry secrets.
    try:
        sys.stderr.write(f"agentrt agent: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _user_content(turn: Turn) -> str | list[dict[str, Any]]:
    """The OpenAI ``content`` of a user turn (§B: all-text turns become one string)."""
    parts: list[dict[str, Any]] = []
    for block in turn.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append({"type": "image_url", "image_url": {"url": f"data:{block.media_type};base64,{block.data}"}})
        elif isinstance(block, DocumentBlock):
            parts.append({"type": "text", "text": DOCUMENT_FALLBACK})
    if not parts:
        raise AgentrtError("empty_input_content", "the turn has no usable content")
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _decode_line(codec: AgentCodec, line: bytes | Oversized) -> Turn | Shutdown | Interrupt | None:
    """Decode one input line; ``AgentrtError`` with the per-turn code on bad input."""
    if isinstance(line, Oversized):
        raise AgentrtError("input_message_oversize", "an input line exceeds 32 MiB")
    text = _settings.js_trim(line.decode("utf-8", "replace"))
    if not text:
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise AgentrtError("invalid_input_json", "an input line is not JSON") from exc
    decoded = codec.decode_input(obj)
    if isinstance(decoded, InputError):
        raise AgentrtError(decoded.code, decoded.detail)
    return decoded


class Agent:
    """A started agent: validated settings, provider, tools, session."""

    def __init__(
        self,
        *,
        settings: _settings.AgentSettings,
        codec: AgentCodec,
        provider: Provider,
        tools: Mapping[str, Tool],
        session: _history.SessionState,
    ) -> None:
        self.settings = settings
        self.codec = codec
        self.provider = provider
        self.tools = dict(tools)
        self.session = session
        self._initialized = False

    async def handle(self, printer: Printer, turn: Turn) -> None:
        """Run one accepted turn and print its result (success or error)."""
        printer.start_turn()
        user = {"role": "user", "content": _user_content(turn)}
        if not self._initialized:
            self._initialized = True
            await printer.emit(
                SessionStarted(
                    session_id=self.session.session_id,
                    model=self.settings.model,
                    raw={
                        "type": "system",
                        "subtype": "init",
                        "session_id": self.session.session_id,
                        "model": self.settings.model,
                        "cwd": os.getcwd(),
                        "tools": sorted(self.tools),
                    },
                )
            )
        messages: list[dict[str, Any]] = []
        if self.settings.system_prompt:
            messages.append({"role": "system", "content": self.settings.system_prompt})
        messages.extend(self.session.messages)
        messages.append(user)
        result = await run_turn(
            provider=self.provider,
            model=self.settings.model,
            messages=messages,
            tools=self.tools,
            session_id=self.session.session_id,
            out=printer,
            time_limit=self.settings.timeout,
        )
        # Saved before the result is printed: a host that saw the result can resume it.
        await self._save([user, {"role": "assistant", "content": result.text}])
        # No checkpoint between the save and this: once saved, the result is queued.
        await printer.emit(TurnCompleted(session_id=self.session.session_id, usage=result.usage, result=result.text))

    async def interrupted(self, printer: Printer, turn: Turn) -> None:
        """Print the end of a turn an interrupt cancelled (and keep what it said in the session)."""
        if printer.turn_ended:
            # The turn had ended on its own: its result is queued, only the write was cut short.
            await printer.flush()
            return
        try:
            user: dict[str, Any] | None = {"role": "user", "content": _user_content(turn)}
        except AgentrtError:
            user = None  # refused before it started: nothing to keep
        if user is not None:
            partial = "".join(printer.turn_text)
            await self._save([user, {"role": "assistant", "content": partial}] if partial else [user])
        await printer.emit(TurnFailed(code="turn_interrupted", message="the turn was interrupted"))

    async def _save(self, messages: list[dict[str, Any]]) -> None:
        # An append under the session's lock, not a rewrite of what this process loaded:
        # another process resuming the same session may have saved a turn meanwhile.
        # Shielded: a session half written by a cancelled turn would be worse than a late interrupt.
        with trio.CancelScope(shield=True):
            self.session = await trio.to_thread.run_sync(
                _history.append_session, self.settings.state_dir, self.session.session_id, messages
            )


async def _start(argv: Sequence[str], env: Mapping[str, str], plugins: Any) -> Agent:
    args = _settings.parse_args(argv)
    if plugins is None:
        from .._plugins import get_plugins

        plugins = get_plugins()
    codec = plugins.dialect(args.dialect).agent_codec()
    if args.partial and isinstance(codec, PartialMessages):
        codec.partial = True  # the stream-json codec's `--include-partial-messages` mode
    model = _settings.resolve_model(args, env)
    provider_name = _settings.js_trim(env.get("AGENTRT_PROVIDER", "")) or _settings.DEFAULT_PROVIDER
    factory = plugins.providers().get(provider_name)
    if factory is None:
        raise AgentrtError("provider_unavailable", f"no provider plugin named {provider_name!r} is loaded")
    provider: Provider = factory(env)
    try:
        tools: dict[str, Tool] = {}
        for _name, tool_factory in sorted(plugins.tools().items()):
            tool = tool_factory(env)
            if tool is not None:
                tools[tool.name] = tool
        timeout = _settings.resolve_timeout(env)
        state_dir = await trio.to_thread.run_sync(_history.prepare_state_dir, _settings.resolve_state_dir(env))
        resume = args.resume
        if resume:
            _history.validate_session_id(resume)
        session = await trio.to_thread.run_sync(_history.load_session, state_dir, resume or None)
        system_prompt = _settings.resolve_system_prompt(env)
    except BaseException:
        with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
            await provider.aclose()
        raise
    settings = _settings.AgentSettings(
        model=model,
        timeout=timeout,
        system_prompt=system_prompt,
        state_dir=state_dir,
        dialect=args.dialect,
        provider=provider_name,
    )
    return Agent(settings=settings, codec=codec, provider=provider, tools=tools, session=session)


async def _serve_lines(agent: Agent, source: ByteSource, printer: Printer) -> None:
    send, receive = trio.open_memory_channel[Any](_READ_AHEAD)
    running: list[trio.CancelScope] = []  # the scope of the turn being run, if any

    async def read() -> None:
        async with send:
            async for line in read_lines(source):
                try:
                    decoded: Any = _decode_line(agent.codec, line)
                except AgentrtError as exc:
                    decoded = exc  # refused in its turn, after the one running
                # Control requests (the SDK's `initialize`, an `interrupt`) are
                # answered as soon as their line is read, even mid-turn.
                await printer.drain()
                if decoded is None:
                    continue
                if isinstance(decoded, Interrupt):
                    for scope in running:
                        scope.cancel()
                    continue
                await send.send(decoded)
                if isinstance(decoded, Shutdown):
                    return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        async with receive:
            async for item in receive:
                if isinstance(item, Shutdown):
                    break
                if isinstance(item, AgentrtError):
                    await printer.failed(public_code(item), public_reason(item))
                    continue
                with trio.CancelScope() as scope:
                    running.append(scope)
                    try:
                        await agent.handle(printer, item)
                    except AgentrtError as exc:
                        await printer.failed(public_code(exc), public_reason(exc))
                    except trio.BrokenResourceError:
                        raise
                    except Exception as exc:  # a bug must cost one turn, not the session
                        _log(f"turn failed: {type(exc).__name__}")
                        await printer.failed("agent_internal_error", f"the agent failed: {type(exc).__name__}")
                    finally:
                        running.clear()
                if scope.cancelled_caught:
                    await agent.interrupted(printer, item)
        # Shutdown or end of input: stop reading (shutdown means read no further).
        nursery.cancel_scope.cancel()


async def serve(
    argv: Sequence[str],
    env: Mapping[str, str],
    source: ByteSource,
    sink: ByteSink,
    *,
    plugins: Any = None,
) -> int:
    """Run the agent over ``source``/``sink`` until shutdown; return the exit status."""
    status = 0
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        try:
            agent = await _start(argv, env, plugins)
        except Exception as exc:
            if not isinstance(exc, AgentrtError):
                _log(f"startup failed: {type(exc).__name__}")
            code = public_code(exc, "agent_startup_failed")
            reason = public_reason(exc)
            try:  # a JSON-RPC dialect (acp) answers its client's first request with the error instead
                await report_startup_error(
                    dialect_in_argv(argv, "--dialect"), source, sink, code, reason,
                    line=startup_error_line(code, reason), plugins=plugins,
                )  # fmt: skip
            except trio.BrokenResourceError:
                _log(f"startup failed: {code}")
            return 1
        printer = Printer(agent.codec, sink)
        try:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal status
                    async for signum in signals:
                        # SIGTERM is ordinary termination: exit 0.  Ctrl-C keeps its
                        # conventional 130 so scripts can tell the two apart.
                        status = 130 if signum == signal.SIGINT else 0
                        printer.abort()  # a write blocked on a full stdout must not hold the exit
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(watch)
                try:
                    await _serve_lines(agent, source, printer)
                except* trio.BrokenResourceError:
                    # The host closed our stdout (or a signal cut a write short): nothing
                    # more can be said, so end quietly.
                    if not printer.aborted:
                        _log("output closed; exiting")
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
                await agent.provider.aclose()
    return status
