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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson
import trio

from .errors import AgentrtError

__all__ = ["BridgeArgs", "parse_bridge_args", "serve_bridge"]

_OVERRIDE = re.compile(r"^(AWP_AGENT_[A-Z0-9_]+|AGENTRT_CONFIG)=(.*)$", re.DOTALL)
_IGNORED_FLAGS = {"--print", "--verbose"}
_IGNORED_WITH_VALUE = {"--input-format", "--output-format", "--mcp-config"}


@attrs.frozen(kw_only=True)
class BridgeArgs:
    """What the bridge's own argv says."""

    to: str = "awp-jsonl"
    model: str | None = None
    resume: str | None = None
    agent: str | None = None
    overrides: Mapping[str, str] = attrs.field(factory=dict)


def parse_bridge_args(argv: Sequence[str]) -> BridgeArgs:
    """Parse ``--to D``, ``--model M``, ``--resume ID``, ``-a/--agent NAME`` and ``AWP_AGENT_*=V`` overrides.

    The host appends ``--model``/``--resume``/``--mcp-config`` after the prefix
    arguments, so they are accepted anywhere, before or after ``--``.  Any other
    argument is ``unsupported_argument:<arg>``.
    """
    to = "awp-jsonl"
    model = resume = agent = None
    overrides: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        if arg == "--":
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
    return BridgeArgs(to=to, model=model, resume=resume, agent=agent, overrides=overrides)


def _line(obj: Mapping[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _warn(code: str, detail: str) -> None:
    print(f"agentrt bridge: {code}: {detail[:300]}", file=sys.stderr, flush=True)


async def serve_bridge(args: BridgeArgs, env: Mapping[str, str], plugins: Any, source: Any, sink: Any) -> int:
    """Run the bridge on ``source``/``sink`` (byte streams); returns the exit status."""
    from ._config import resolve_agent
    from ._conversation import open_conversation
    from ._launch import is_valid_session_id
    from .agent._io import Oversized, read_lines
    from .dialect import InputError, Shutdown, Turn
    from .events import Diagnostic, TurnFailed

    outer = plugins.dialect(args.to).agent_codec()
    inner_env = {**env, **args.overrides}
    launch = resolve_agent(inner_env, args.agent, model=args.model).launch
    if args.resume is not None and not is_valid_session_id(args.resume):
        raise AgentrtError("invalid_resume_session_id", "--resume must match [A-Za-z0-9._:-]{1,256}")

    async def emit(event: Any) -> None:
        objs = outer.encode(event)
        if objs:
            await sink.send_all(b"".join(_line(o) for o in objs))

    async with open_conversation(launch, plugins=plugins, resume=args.resume, parent_env=inner_env) as conv:
        async for raw in read_lines(source):
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
            decoded = outer.decode_input(obj)
            owed = getattr(outer, "drain_output", None)
            if owed is not None:  # answers the outer protocol wants now (a request/response handshake)
                pending = owed()
                if pending:
                    await sink.send_all(b"".join(_line(o) for o in pending))
            if decoded is None:
                continue
            if isinstance(decoded, Shutdown):
                break
            if isinstance(decoded, InputError):
                await emit(TurnFailed(code=decoded.code, message=decoded.detail))
                continue
            assert isinstance(decoded, Turn)
            try:
                async for event in conv.send(decoded):
                    if isinstance(event, Diagnostic):
                        _warn(event.code, event.detail)
                    await emit(event)
            except AgentrtError as exc:
                await emit(TurnFailed(code=exc.code, message=exc.detail))
        with trio.CancelScope(shield=True):
            await conv.stop()
    return 0
